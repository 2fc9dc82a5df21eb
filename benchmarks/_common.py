"""Helpers shared by the benchmark scripts: run a process tree and watch its memory,
read progress points from logs / TensorBoard files, medians, and table printing.

A "point" is one progress report of a training run: (wall_time, env_steps[, value]).
Both systems are measured from such points so that FPS means the same thing for both.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import psutil

REPO = Path(__file__).resolve().parents[1]


def peer_dir(name: str) -> Path:
    """Where a compared system's venv or checkout lives unless a flag says otherwise: `<cache>/sf_hydra/peers/<name>`,
    the cache being $XDG_CACHE_HOME, or ~/.cache where that is unset, empty or relative (the XDG spec). Outside the
    checkout (a venv there would be linted and collected by the tests), the same on every machine."""
    cache = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(cache) if os.path.isabs(cache) else Path.home() / ".cache") / "sf_hydra" / "peers" / name

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


def first_reaching(points: Sequence[Point], target: float,
                   start_time: float) -> Tuple[Optional[float], Optional[float]]:
    """(env steps, seconds since launch) of the first point whose value >= target."""
    for wall, steps, value in points:
        if value is not None and value >= target:
            return steps, wall - start_time
    return None, None


# ----------------------------------------------------------------------------- processes


def _machine_busy_seconds() -> float:
    """CPU seconds spent busy by all cores since boot (idle and iowait excluded)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq + t.steal


def wait_for_quiet(max_wait: float, busy_cores: float = 0.3, window: float = 3.0) -> float:
    """Wait (up to max_wait s) until other processes use < busy_cores; return the last reading.

    On a shared machine this keeps the alternating runs from landing on someone's burst.
    """
    if max_wait <= 0:
        return float("nan")
    deadline = time.time() + max_wait
    while True:
        before = _machine_busy_seconds()
        time.sleep(window)
        busy = (_machine_busy_seconds() - before) / window
        if busy < busy_cores or time.time() >= deadline:
            return busy


def _memory_bytes(proc: psutil.Process) -> Tuple[int, int]:
    """(RSS, PSS) of one process in bytes; PSS splits shared pages between their users."""
    try:
        mem = proc.memory_full_info()
    except psutil.Error:  # gone, a zombie by now, or not readable
        return 0, 0
    return mem.rss, mem.pss


def _cpu_seconds(proc: psutil.Process) -> float:
    """User + system CPU time of one process so far (its children's not included)."""
    try:
        t = proc.cpu_times()
    except psutil.Error:
        return 0.0
    return t.user + t.system


def _children_cpu_seconds() -> float:
    """User + system CPU time of this process's waited-for children and, recursively, theirs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _session(pid: int) -> Optional[int]:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def tree_processes(root: int) -> Dict[int, psutil.Process]:
    """{pid: process} of the root's session plus all its descendants, zombies excluded.

    The run is started in a new session, so processes re-parented to init when their
    parent dies are still found by their session id. A psutil.Process remembers its start
    time: signalling it later never hits a reused pid.
    """
    live = {p.pid: p for p in psutil.process_iter(["ppid", "status"]) if p.info["status"] != psutil.STATUS_ZOMBIE}
    members = {pid for pid in live if _session(pid) == root} | {root}
    grew = True
    while grew:
        new = {pid for pid, p in live.items() if p.info["ppid"] in members} - members
        members |= new
        grew = bool(new)
    return {pid: live[pid] for pid in members if pid in live}


def kill_tree(root: int, seen: Dict[int, psutil.Process], grace: float = 5.0) -> None:
    """SIGTERM then SIGKILL the run's process group, then any straggler we ever saw in it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(root, sig)
        except ProcessLookupError:
            pass
        alive = _alive(seen | tree_processes(root))
        for proc in alive:
            try:
                proc.send_signal(sig)  # psutil refuses a pid that now belongs to another process
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=grace)


def _alive(procs: Dict[int, psutil.Process]) -> List[psutil.Process]:
    out = []
    for proc in procs.values():
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.NoSuchProcess:
            pass
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
    # CPU seconds (user + system) of the tree: its processes that were waited for (getrusage of the children),
    # exact; less noisy than any wall-clock figure on a shared machine
    cpu_seconds: float = 0.0
    root_cpu_seconds: float = 0.0  # the command's own process (train.py: the learner's), at its last poll
    # the tree's processes that run no Python interpreter (env engines of their own, as ViZDoom's), at their last
    # polls: of cpu_seconds, what the envs' simulation costs apart from the workers driving them
    engine_cpu_seconds: float = 0.0

    @property
    def wall_seconds(self) -> float:
        return self.end_time - self.start_time


def run_tree(cmd: Sequence[str], log_path: Path, cwd: Path, env: Optional[dict] = None,
             timeout: float = 1800.0, poll: float = 1.0) -> ProcessRun:
    """Run cmd in its own session, poll its tree's memory, and kill the whole tree at the end."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    busy_before = _machine_busy_seconds()
    children_before = _children_cpu_seconds()
    with open(log_path, "wb") as log:
        start = time.time()
        proc = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT, cwd=cwd,
                                env=env, start_new_session=True)
        seen: Dict[int, psutil.Process] = {}
        cpu: Dict[int, float] = {}  # last CPU seconds seen per process of the tree
        engines: set = set()  # pids of the tree's processes that run no Python interpreter
        peak_rss = peak_pss = peak_procs = 0
        try:
            while proc.poll() is None and time.time() - start < timeout:
                procs = tree_processes(proc.pid)
                seen.update(procs)
                mem = [_memory_bytes(p) for p in procs.values()]
                cpu.update({pid: _cpu_seconds(p) for pid, p in procs.items()})
                engines.update(pid for pid, p in procs.items() if pid != proc.pid and not _runs_python(p))
                peak_rss = max(peak_rss, sum(m[0] for m in mem))
                peak_pss = max(peak_pss, sum(m[1] for m in mem))
                peak_procs = max(peak_procs, len(procs))
                try:
                    proc.wait(timeout=poll)  # back as soon as it exits: the wall time is not rounded up to `poll`
                except subprocess.TimeoutExpired:
                    pass
        finally:
            returncode = proc.poll()
            end = time.time()
            other_seconds = _machine_busy_seconds() - busy_before - sum(cpu.values())
            kill_tree(proc.pid, seen)
            proc.wait()
    other_cpu = max(0.0, other_seconds / max(end - start, 1e-9))
    return ProcessRun(returncode, start, end, peak_rss / 2**20, peak_pss / 2**20, peak_procs, other_cpu,
                      _children_cpu_seconds() - children_before, cpu.get(proc.pid, 0.0),
                      sum(cpu.get(pid, 0.0) for pid in engines))


def _runs_python(proc: psutil.Process) -> bool:
    """Whether a process runs a Python interpreter (its executable's name starts with `python`)."""
    try:
        return Path(proc.exe() or proc.name()).name.startswith("python")
    except psutil.Error:
        return True  # gone or unreadable: not counted as an engine


def add_run_arguments(parser, timeout: float) -> None:
    """The options every seed-by-seed benchmark takes: --timeout (seconds per run before it is killed),
    --wait-quiet, --work-dir and the Hydra overrides after `--`."""
    parser.add_argument("--timeout", type=float, default=timeout, help="seconds per run before it is killed")
    parser.add_argument("--wait-quiet", type=float, default=0.0,
                        help="wait up to this long for a quiet machine before each run")
    parser.add_argument("--work-dir", type=Path, default=None, help="keep logs and run folders here")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides (after --)")


def start_benchmark(parser, argv, prefix: str):
    """Parses the command line, makes Ctrl+C and SIGTERM clean up the runs, and returns (args, the work
    folder: --work-dir, or a new temporary one named with `prefix`)."""
    import tempfile

    args = parser.parse_args(argv)
    exit_cleanly_on_signals()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    return args, work


def exit_cleanly_on_signals() -> None:
    """Make SIGTERM and SIGINT raise, so that run_tree's cleanup kills the run's tree.

    (A background job started by a non-interactive shell ignores SIGINT by default.)
    """
    def _raise(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _raise)
    signal.signal(signal.SIGINT, _raise)


def python_env(extra_path: Optional[Path] = None, repo: Path = REPO) -> dict:
    """The current environment with `repo`'s `src/` first on PYTHONPATH (so train.py imports
    that checkout's sf_hydra, not the installed one)."""
    env = dict(os.environ)
    paths = [str(repo / "src")] + ([str(extra_path)] if extra_path else [])
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


# ----------------------------------------------------------------------------- sf_hydra runs


def train_py_command(python: str, overrides: Sequence[str], repo: Path = REPO) -> List[str]:
    return [python, str(repo / "train.py"), *overrides]


@contextlib.contextmanager
def revision_checkout(rev: Optional[str], work: Path):
    """A detached worktree of this repository at git revision `rev` in `work` (None: yields None),
    removed again on exit: a baseline run's train.py and src/ (same venv). A `rev` that is a folder
    holding train.py and src/ (an older revision's files, e.g. `git archive REV train.py src conf |
    tar -x -C DIR` carried to a machine without the repository's history) is used as it is."""
    if rev is None:
        yield None
        return
    if (Path(rev) / "train.py").is_file() and (Path(rev) / "src").is_dir():
        yield Path(rev).absolute()
        return
    path = work / "baseline_checkout"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--force", str(path), rev], check=True,
                   stdout=subprocess.DEVNULL)
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], check=False)


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


def add_run_args(parser, timeout: float) -> None:
    """The options every script that launches runs shares: run timeout, waiting for a quiet machine,
    where runs are kept, and extra Hydra overrides after `--`."""
    parser.add_argument("--timeout", type=float, default=timeout, help="seconds before a run is killed")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="before each run, wait up to this long for the machine to be idle (shared machines)")
    parser.add_argument("--work-dir", type=Path, default=None, help="keep runs here (default: a temp dir, deleted)")
    parser.add_argument("overrides", nargs="*", help="after `--`: extra Hydra overrides for sf_hydra")


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
