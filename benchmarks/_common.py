"""Helpers shared by the benchmark scripts: run a process tree and watch its memory,
read progress points from logs / TensorBoard files, medians, and table printing.

A "point" is one progress report of a training run: (wall_time, env_steps[, value]).
Both systems are measured from such points so that FPS means the same thing for both.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]

Point = Tuple[float, float, float]  # (wall_time, env_steps, value)


# ----------------------------------------------------------------------------- numbers


def median(values: Iterable[Optional[float]]) -> Optional[float]:
    """Median of the values that exist (None = "did not happen"); None if there are none."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def steady_fps(points: Sequence[Point]) -> Optional[float]:
    """Env steps per second between the first report with steps > 0 and the last report.

    Start-up (imports, process spawn, env creation, the first rollout) happens before the
    first non-zero report, so it is left out; so is shutdown after the last report.
    """
    started = [p for p in points if p[1] > 0]
    if len(started) < 2 or started[-1][0] <= started[0][0]:
        return None
    (t0, s0, _), (t1, s1, _) = started[0], started[-1]
    return (s1 - s0) / (t1 - t0)


def first_reaching(points: Sequence[Point], target: float, start_time: float) -> Tuple[Optional[float], Optional[float]]:
    """(env steps, seconds since launch) of the first point whose value >= target."""
    for wall, steps, value in points:
        if value is not None and value >= target:
            return steps, wall - start_time
    return None, None


# ----------------------------------------------------------------------------- processes


def _read_stat(pid: int) -> Optional[Tuple[int, int, int]]:
    """(ppid, session id, start time) of a live process; None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = data[data.rfind(")") + 2 :].split()  # the name may contain spaces and ')'
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[3]), int(fields[19])


def _cpu_ticks(pid: int) -> int:
    """User + system CPU time of one process so far, in clock ticks."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except OSError:
        return 0
    fields = data[data.rfind(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def _machine_busy_ticks() -> int:
    """CPU ticks spent busy by all cores since boot (idle and iowait excluded)."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    return user + nice + system + irq + softirq + steal


def wait_for_quiet(max_wait: float, busy_cores: float = 0.3, window: float = 3.0) -> float:
    """Wait (up to max_wait s) until other processes use < busy_cores; return the last reading.

    On a shared machine this keeps the alternating runs from landing on someone's burst.
    """
    if max_wait <= 0:
        return float("nan")
    deadline = time.time() + max_wait
    while True:
        before = _machine_busy_ticks()
        time.sleep(window)
        busy = (_machine_busy_ticks() - before) / os.sysconf("SC_CLK_TCK") / window
        if busy < busy_cores or time.time() >= deadline:
            return busy


def _memory_kb(pid: int) -> Tuple[int, int]:
    """(RSS, PSS) of one process in kB; PSS splits shared pages between their users."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def tree_pids(root: int) -> Dict[int, int]:
    """{pid: start time} of the root's session plus all its descendants.

    The run is started in a new session, so processes re-parented to init when their
    parent dies are still found by their session id.
    """
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _read_stat(int(entry))
            if st is not None:
                stats[int(entry)] = st
    members = {pid for pid, (_, sid, _) in stats.items() if sid == root} | {root}
    grew = True
    while grew:
        new = {pid for pid, (ppid, _, _) in stats.items() if ppid in members} - members
        members |= new
        grew = bool(new)
    return {pid: stats[pid][2] for pid in members if pid in stats}


def kill_tree(root: int, seen: Dict[int, int], grace: float = 5.0) -> None:
    """SIGTERM then SIGKILL the run's process group, then any straggler we ever saw in it.

    A straggler is only killed if its start time still matches (the pid was not reused).
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(root, sig)
        except ProcessLookupError:
            pass
        alive = _alive(seen | tree_pids(root))
        for pid in alive:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + grace
        while time.time() < deadline and _alive(alive):
            time.sleep(0.1)


def _alive(pids: Dict[int, int]) -> Dict[int, int]:
    out = {}
    for pid, start in pids.items():
        st = _read_stat(pid)
        if st is not None and st[2] == start:
            out[pid] = start
    return out


@dataclass
class ProcessRun:
    """What we learn from running one command: exit code, times, peak memory of its tree."""

    returncode: Optional[int]  # None: killed at the timeout
    start_time: float
    end_time: float
    peak_rss_mb: float  # sum of the tree's RSS (shared pages counted once per process)
    peak_pss_mb: float  # sum of the tree's PSS (shared pages split: the honest total)
    peak_procs: int
    other_cpu: float  # cores kept busy by other processes meanwhile: the machine is shared, judge noise by it

    @property
    def wall_seconds(self) -> float:
        return self.end_time - self.start_time


def run_tree(cmd: Sequence[str], log_path: Path, cwd: Path, env: Optional[dict] = None,
             timeout: float = 1800.0, poll: float = 1.0) -> ProcessRun:
    """Run cmd in its own session, poll its tree's memory, and kill the whole tree at the end."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    busy_before = _machine_busy_ticks()
    with open(log_path, "wb") as log:
        start = time.time()
        proc = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT, cwd=cwd,
                                env=env, start_new_session=True)
        seen: Dict[int, int] = {}
        ticks: Dict[int, int] = {}  # last CPU ticks seen per process of the tree
        peak_rss = peak_pss = peak_procs = 0
        try:
            while proc.poll() is None and time.time() - start < timeout:
                pids = tree_pids(proc.pid)
                seen.update(pids)
                mem = [_memory_kb(pid) for pid in pids]
                ticks.update({pid: _cpu_ticks(pid) for pid in pids})
                peak_rss = max(peak_rss, sum(m[0] for m in mem))
                peak_pss = max(peak_pss, sum(m[1] for m in mem))
                peak_procs = max(peak_procs, len(pids))
                time.sleep(poll)
        finally:
            returncode = proc.poll()
            end = time.time()
            other_ticks = _machine_busy_ticks() - busy_before - sum(ticks.values())
            kill_tree(proc.pid, seen)
            proc.wait()
    other_cpu = max(0.0, other_ticks / os.sysconf("SC_CLK_TCK") / max(end - start, 1e-9))
    return ProcessRun(returncode, start, end, peak_rss / 1024, peak_pss / 1024, peak_procs, other_cpu)


def exit_cleanly_on_signals() -> None:
    """Make SIGTERM and SIGINT raise, so that run_tree's cleanup kills the run's tree.

    (A background job started by a non-interactive shell ignores SIGINT by default.)
    """
    def _raise(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _raise)
    signal.signal(signal.SIGINT, _raise)


def python_env(extra_path: Optional[Path] = None) -> dict:
    """The current environment with `src/` on PYTHONPATH (so train.py imports sf_hydra)."""
    env = dict(os.environ)
    paths = [str(REPO / "src")] + ([str(extra_path)] if extra_path else [])
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


# ----------------------------------------------------------------------------- sf_hydra runs


def train_py_command(python: str, overrides: Sequence[str]) -> List[str]:
    return [python, str(REPO / "train.py"), *overrides]


def read_tb_scalars(run_dir: Path, tag: str) -> List[Point]:
    """All (wall_time, step, value) of one scalar tag in the run's `tb/` event files, in time order."""
    from sf_hydra.report.tensorboard import read_scalars

    return sorted((s.wall_time, float(s.step), s.value) for s in read_scalars(run_dir).get(tag, []))


def read_summary(run_dir: Path) -> dict:
    """sf_hydra's end-of-run summary.json, or {} if the run did not finish."""
    import json

    path = run_dir / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {}


# ----------------------------------------------------------------------------- printing


def fmt(value, spec: str = ",.0f", none: str = "-") -> str:
    if value is None:
        return none
    if isinstance(value, str):
        return value
    return format(value, spec)


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Plain aligned columns: first column left-aligned, the rest right-aligned."""
    table = [list(headers)] + [list(r) for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(headers))]

    def line(row):
        cells = [str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(cells)

    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for row in table[1:]:
        print(line(row))
