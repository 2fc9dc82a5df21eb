"""Sample Factory 2.1.1 vs sf_hydra on the same env, workers, envs per worker, rollout,
batch size and model size, run alternately (SF, ours, SF, ours, ...) on one machine.

    python benchmarks/vs_sample_factory.py --setup             # once: SF in its own venv
    python benchmarks/vs_sample_factory.py --preset cartpole_2x16 --repeats 3
    python benchmarks/vs_sample_factory.py --preset doom_basic_2x8 -- algo.num_epochs=1

Arguments after `--` are extra Hydra overrides for sf_hydra only.

    python benchmarks/vs_sample_factory.py --preset doom_basic_2x8 --baseline 193bb25

`--baseline REV` adds a third system, sf_hydra as of git revision REV (a temporary worktree,
same venv), to the alternation (SF, REV, ours, SF, ...): a change's before/after figures and
both against Sample Factory, from one script under the same conditions.

How the figures are defined (the same way for both systems):
- FPS: env frames (agent steps x frameskip) between the first progress report with a
  non-zero step count and the last report, divided by the wall time between them. Start-up
  (imports, process spawn, env creation, first rollout) and shutdown are excluded.
  Sample Factory's reports are its stdout lines "Fps is (...). Total num frames: N",
  printed every 5 s, timed by their log timestamp. sf_hydra's reports are the `perf/fps`
  scalars in `<run>/tb/` (step = env frames, wall_time = when written), written every
  5 s because we pass `logger.experiment_summaries_interval=5`.
- wall s: launch to exit of the whole command, start-up included.
- time to target (CartPole: 450): the first report where the average return of the last
  100 episodes is >= 450, as env frames and seconds since launch. SF: its "Avg episode
  reward" line (SF averages over `stats_avg=100` episodes) paired with the report just
  before it; ours: the `episode/return` scalar. Resolution is one report (5 s).
- peak memory: the largest sum over the run's process tree (the run's session plus its
  descendants, polled every second) of RSS (shared pages counted in every process) and of
  PSS (shared pages split between processes).
- other CPU: cores kept busy meanwhile by processes outside the run (machine busy time
  from psutil.cpu_times() minus the run tree's CPU time, this script's poller included). The
  machine may be shared: runs with other CPU well above ~0.1 cores are noisy.

Both run the whole budget: sf_hydra's early stop (`train_until_avg_return`, set by its
CartPole config) is turned off. Learning hyper-parameters are each system's own defaults
for the env (ours: conf/env/...); what is matched is the sampling and model shape.

Sample Factory settings: everything at its defaults except the flags in PRESETS (its gym
example uses `--reward_scale=0.1` in its docstring; we keep the default 1.0). Doom basic
with SF's own Doom defaults: convnet_simple + 512 FC + GRU 512, 128x72 RGB, frameskip 4,
batch 1024, rollout 32, 1 epoch; ours composes the same through `env=doom/basic`.
Returns are in the env's own units: SF's doom_basic wrapper scales rewards by 0.01, so
its figures are divided by 0.01 here.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    REPO,
    Point,
    add_run_args,
    exit_cleanly_on_signals,
    first_reaching,
    fmt,
    median,
    peer_dir,
    print_table,
    python_env,
    ratio,
    read_summary,
    read_tb_scalars,
    revision_checkout,
    run_tree,
    steady_fps,
    train_py_command,
    wait_for_quiet,
)

SF_VERSION = "2.1.1"
TORCH_VERSION = "2.13.0"
REPORT_SEC = 5  # SF prints a progress report every 5 s; we ask ours for TB scalars as often

COMMON_SF = ["--device=cpu", "--with_wandb=False"]
CARTPOLE_SF = ["-m", "sf_examples.train_gym_env", "--env=CartPole-v1", "--use_rnn=False",
               "--encoder_mlp_layers", "64", "64", "--batch_size=512", "--rollout=32"]
# SF's batch and rollout; the learner's passes per sample as in the figures before CartPole's tuned defaults
CARTPOLE_OURS = ["env=gym/cartpole", "algo.batch_size=512", "algo.rollout=32", "algo.num_batches_per_epoch=2",
                 "algo.num_epochs=2"]


@dataclass
class Preset:
    sf_args: List[str]  # after the venv's python
    our_overrides: List[str]
    env_steps: int
    target: Optional[float] = None  # average return to time (None: no target)
    sf_reward_scale: float = 1.0  # SF's env wrapper multiplies rewards by this; we undo it


def _workers(n: int, k: int) -> tuple:
    return ([f"--num_workers={n}", f"--num_envs_per_worker={k}"],
            [f"hardware.num_workers={n}", f"hardware.num_envs_per_worker={k}"])


def _preset_table() -> dict:
    presets = {}
    for n, k in ((2, 16), (2, 32)):
        sf_w, ours_w = _workers(n, k)
        presets[f"cartpole_{n}x{k}"] = Preset(CARTPOLE_SF + sf_w + COMMON_SF, CARTPOLE_OURS + ours_w,
                                              env_steps=500_000, target=450.0)
    sf_w, ours_w = _workers(2, 8)
    presets["doom_basic_2x8"] = Preset(
        ["-m", "sf_examples.vizdoom.train_vizdoom", "--env=doom_basic"] + sf_w + COMMON_SF,
        ["env=doom/basic", "algo.batch_size=1024", "algo.num_batches_per_epoch=1", "algo.rollout=32"] + ours_w,
        env_steps=300_000, sf_reward_scale=0.01)  # SF's doom_basic spec scales rewards by 0.01
    # A GPU machine with 16 cores (the lent H100 machine): SF's batched inference and learner on
    # the GPU, ours with the learner on CUDA; how ours acts is chosen per --variant.
    sf_w, ours_w = _workers(16, 8)
    presets["doom_battle_gpu_16x8"] = Preset(
        ["-m", "sf_examples.vizdoom.train_vizdoom", "--env=doom_battle", "--device=gpu", "--with_wandb=False",
         "--worker_num_splits=2", "--batch_size=1024", "--rollout=32"] + sf_w,
        ["env=doom/battle", "algo.batch_size=1024", "algo.num_batches_per_epoch=1", "algo.rollout=32",
         "hardware.device=cuda"] + ours_w,
        env_steps=1_000_000)
    return presets


PRESETS = _preset_table()


@dataclass
class RunResult:
    system: str
    seed: int
    ok: bool
    fps: Optional[float] = None
    env_steps: Optional[float] = None
    wall_seconds: Optional[float] = None
    steps_to_target: Optional[float] = None
    secs_to_target: Optional[float] = None
    last_return: Optional[float] = None
    peak_rss_mb: Optional[float] = None
    peak_pss_mb: Optional[float] = None
    procs: Optional[int] = None
    other_cpu: Optional[float] = None
    note: str = ""


# ----------------------------------------------------------------------------- setup


def setup_venv(venv: Path) -> None:
    """Create the venv and install SF in it (torch first, so pip takes the local CPU wheel)."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install"]
    subprocess.run(pip + [f"torch=={TORCH_VERSION}"], check=True)
    subprocess.run(pip + [f"sample-factory[vizdoom,mujoco]=={SF_VERSION}"], check=True)
    # Atari: ale-py 0.9 bundles the ROMs (SF's [atari] extra fetches them from the internet);
    # benchmarks/sf_atari_env.py registers its ids. Its gymnasium>=1 pin is a test extra only.
    subprocess.run(pip + ["--no-deps", "ale-py==0.9.0"], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-c",
                    "from importlib.metadata import version as v; "
                    "print('sample-factory', v('sample-factory'), 'torch', v('torch'))"],
                   check=True)


# ----------------------------------------------------------------------------- Sample Factory

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STAMP = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[\s*\d+\]"
_REPORT = re.compile(_STAMP + r" Fps is .*?Total num frames: (\d+)")
_REWARD = re.compile(_STAMP + r" Avg episode reward: \[\(0, '([-\d.eE+naif]+)'\)\]")
_COLLECTED = re.compile(r"Collected \{0: (\d+)\}")


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def parse_sf_log(text: str) -> tuple:
    """(progress points, return points, final frames) from SF's stdout.

    A return line follows its progress report; it is given that report's time and frames.
    """
    progress: List[Point] = []
    returns: List[Point] = []
    for line in _ANSI.sub("", text).splitlines():
        m = _REPORT.search(line)
        if m:
            progress.append((_stamp(m.group(1)), float(m.group(2)), None))
            continue
        m = _REWARD.search(line)
        if m and progress:
            wall, steps, _ = progress[-1]
            returns.append((wall, steps, float(m.group(2))))
    collected = _COLLECTED.findall(_ANSI.sub("", text))
    final = float(collected[-1]) if collected else (progress[-1][1] if progress else None)
    return progress, returns, final


@dataclass
class SfPython:
    """The interpreter that runs Sample Factory and its environment: the venv's python, or
    (a machine where SF's packages were unpacked into a folder, as on a lent GPU machine)
    another python with that folder as its whole PYTHONPATH."""

    python: str
    pythonpath: Optional[str] = None

    @classmethod
    def from_args(cls, args) -> "SfPython":
        python = args.sf_python or str(args.venv / "bin" / "python")
        return cls(python, args.sf_pythonpath)

    def env(self) -> Optional[dict]:
        if self.pythonpath is None:
            return None  # inherit
        return {**os.environ, "PYTHONPATH": self.pythonpath}

    def exists(self) -> bool:
        return shutil.which(self.python) is not None or Path(self.python).exists()


def sf_command(python: str, preset: Preset, train_dir: Path, seed: int, env_steps: int,
               extra: Sequence[str] = ()) -> List[str]:
    return [python, *preset.sf_args, f"--experiment=sf_{seed}",
            f"--train_dir={train_dir}", f"--seed={seed}", f"--train_for_env_steps={env_steps}", *extra]


def run_sf(sf: SfPython, preset: Preset, work: Path, seed: int, env_steps: int, extra: Sequence[str],
           timeout: float) -> RunResult:
    run_dir = work / f"sf_{seed}"
    log = run_dir / "stdout.log"
    proc = run_tree(sf_command(sf.python, preset, work / "sf_train", seed, env_steps, extra), log,
                    cwd=_fresh(run_dir), env=sf.env(), timeout=timeout)
    progress, returns, final = parse_sf_log(log.read_text(errors="replace"))
    returns = [(wall, steps, value / preset.sf_reward_scale) for wall, steps, value in returns]
    return _result("SF", seed, proc, progress, returns, final, preset.target, log)


# ----------------------------------------------------------------------------- sf_hydra


def our_overrides(preset: Preset, train_dir: Path, seed: int, env_steps: int, extra: Sequence[str]) -> List[str]:
    return [*preset.our_overrides, f"experiment=ours_{seed}", f"train_dir={train_dir}", f"seed={seed}",
            f"train_for_env_steps={env_steps}", "train_until_avg_return=null",  # a fixed budget, as SF
            f"logger.experiment_summaries_interval={REPORT_SEC}", "restart_behavior=overwrite", *extra]


def run_ours(preset: Preset, work: Path, seed: int, env_steps: int, extra: Sequence[str],
             timeout: float, repo: Path = REPO, system: str = "ours") -> RunResult:
    """One sf_hydra run from the checkout `repo` (another revision's worktree for `base`)."""
    run_dir = work / f"{system}_{seed}"
    log = run_dir / "stdout.log"
    train_dir = work / f"{system}_train"
    cmd = train_py_command(sys.executable, our_overrides(preset, train_dir, seed, env_steps, extra), repo)
    proc = run_tree(cmd, log, cwd=_fresh(run_dir), env=python_env(repo=repo), timeout=timeout)
    exp_dir = train_dir / f"ours_{seed}"
    progress = read_tb_scalars(exp_dir, "perf/fps")
    returns = read_tb_scalars(exp_dir, "episode/return")
    summary = read_summary(exp_dir)
    final = summary.get("env_steps", progress[-1][1] if progress else None)
    result = _result(system, seed, proc, progress, returns, final, preset.target, log)
    if result.fps is None and summary.get("fps"):  # too short for two reports: use its own figure
        result.fps, result.note = summary["fps"], (result.note + " fps from summary.json").strip()
    return result


# ----------------------------------------------------------------------------- shared


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _result(system, seed, proc, progress, returns, final, target, log) -> RunResult:
    """Turn one run's process record and progress points into a RunResult."""
    ok = proc.returncode == 0
    note = "" if ok else (f"timeout, log: {log}" if proc.returncode is None else f"exit {proc.returncode}, log: {log}")
    steps_t, secs_t = first_reaching(returns, target, proc.start_time) if target is not None else (None, None)
    return RunResult(system, seed, ok, fps=steady_fps(progress), env_steps=final, wall_seconds=proc.wall_seconds,
                     steps_to_target=steps_t, secs_to_target=secs_t,
                     last_return=returns[-1][2] if returns else None,
                     peak_rss_mb=proc.peak_rss_mb, peak_pss_mb=proc.peak_pss_mb, procs=proc.peak_procs,
                     other_cpu=proc.other_cpu, note=note)


def print_run(r: RunResult, target: Optional[float]) -> None:
    reached = ""
    if target is not None:
        reached = (f"  {target:g} at {fmt(r.steps_to_target)} steps / {fmt(r.secs_to_target, '.0f')} s"
                   if r.steps_to_target is not None else f"  {target:g} never")
    print(f"[{r.system:4s} seed {r.seed}] fps {fmt(r.fps)}  steps {fmt(r.env_steps)}"
          f"  wall {fmt(r.wall_seconds, '.0f')} s"
          f"  last return {fmt(r.last_return, '.2f')}{reached}  peak RSS {fmt(r.peak_rss_mb)} MB"
          f"  PSS {fmt(r.peak_pss_mb)} MB  procs {r.procs}  other CPU {fmt(r.other_cpu, '.2f')} cores  {r.note}",
          flush=True)


def summarize(results: List[RunResult], target: Optional[float], systems: Sequence[str],
              markdown: Optional[Path] = None, cores: Optional[int] = None) -> None:
    """Medians per system (columns in run order: SF, a baseline revision, our variants), each
    one's ratio to SF and, with a baseline revision, ours / base; with `cores`, the steady FPS per
    core too (the unit of Sample Factory's published single-machine figures). `markdown`: the same
    table also written there as a Markdown table."""
    groups = {name: [r for r in results if r.system == name] for name in systems}
    ratios = [(n, "SF") for n in systems if n != "SF" and "SF" in systems]
    if "base" in systems:
        ratios += [(n, "base") for n in systems if n not in ("SF", "base")]
    rows = []

    def add(name, getter, spec=",.0f", with_ratios=True):
        medians = {n: median(getter(r) for r in runs) for n, runs in groups.items()}
        row = [name, *(fmt(medians[n], spec) for n in systems)]
        row += [fmt(ratio(medians[a], medians[b]), ".2f") if with_ratios else "" for a, b in ratios]
        rows.append(row)

    def counts(name, counter):
        rows.append([name, *(counter(groups[n]) for n in systems), *([""] * len(ratios))])

    add("FPS (steady)", lambda r: r.fps)
    if cores:
        add(f"FPS (steady) per core, {cores} cores", lambda r: None if r.fps is None else r.fps / cores)
    add("wall seconds", lambda r: r.wall_seconds, ".1f")
    add("last avg return", lambda r: r.last_return, ".2f", with_ratios=False)  # a ratio of returns means nothing
    if target is not None:
        add(f"steps to {target:g}", lambda r: r.steps_to_target)
        add(f"seconds to {target:g}", lambda r: r.secs_to_target, ".1f")
        counts(f"runs reaching {target:g}", _count)
    add("peak RSS MB (tree)", lambda r: r.peak_rss_mb)
    add("peak PSS MB (tree)", lambda r: r.peak_pss_mb)
    add("processes (peak)", lambda r: r.procs)
    add("other CPU (cores)", lambda r: r.other_cpu, ".2f")
    counts("runs ok", lambda runs: f"{sum(r.ok for r in runs)}/{len(runs)}")
    names = {"SF": "Sample Factory", "ours": "sf_hydra", "base": "sf_hydra@base"}
    headers = ["median", *(names.get(n, n) for n in systems), *(f"{a}/{b}" for a, b in ratios)]
    print()
    print_table(headers, rows)
    if markdown is not None:
        markdown.write_text(markdown_table(headers, rows))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table: the first column left-aligned, the figures right-aligned."""
    lines = ["| " + " | ".join(str(h) for h in headers) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def with_workers(preset: Preset, workers: int) -> Preset:
    """`preset` with `workers` rollout workers on both sides (its envs per worker kept)."""
    sf = [f"--num_workers={workers}" if a.startswith("--num_workers=") else a for a in preset.sf_args]
    ours = [f"hardware.num_workers={workers}" if o.startswith("hardware.num_workers=") else o
            for o in preset.our_overrides]
    return dataclasses.replace(preset, sf_args=sf, our_overrides=ours)


def _count(runs: List[RunResult]) -> str:
    return f"{sum(r.steps_to_target is not None for r in runs)}/{len(runs)}"


def parse_variant(text: str) -> tuple:
    """'LABEL=override override ...' -> (LABEL, [overrides])."""
    label, sep, overrides = text.partition("=")
    if not sep or not label.strip() or label.strip() in ("SF", "base"):
        raise argparse.ArgumentTypeError(
            f"--variant {text!r}: expected LABEL=OVERRIDES (a label other than SF and base, then Hydra overrides)")
    return label.strip(), overrides.split()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--setup", action="store_true", help="create the venv and install Sample Factory, then exit")
    p.add_argument("--venv", type=Path, default=peer_dir("sf_venv"),
                   help="Sample Factory's venv, made by --setup (default: %(default)s)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="cartpole_2x16")
    p.add_argument("--repeats", type=int, default=3, help="runs per system, alternating SF, ours, SF, ours, ...")
    p.add_argument("--env-steps", type=int, default=None, help="budget per run (default: the preset's)")
    p.add_argument("--systems", default="sf,ours", help="comma list: sf, ours (for testing one side)")
    p.add_argument("--baseline", metavar="REV", default=None,
                   help="also run sf_hydra as of this git revision (before/after a change), alternating")
    p.add_argument("--sf-arg", action="append", default=[], metavar="FLAG",
                   help="extra Sample Factory flag, repeatable: --sf-arg=--reward_scale=0.1")
    p.add_argument("--variant", action="append", type=parse_variant, default=[], metavar="LABEL=OVERRIDES",
                   help="an sf_hydra variant with its own extra overrides, repeatable (default: one, 'ours'): "
                        "--variant 'server=hardware.inference=server' --variant in_worker=")
    p.add_argument("--sf-python", default=None, metavar="PATH",
                   help="run Sample Factory with this interpreter instead of the venv's")
    p.add_argument("--sf-pythonpath", default=None, metavar="DIRS",
                   help="PYTHONPATH for Sample Factory's runs only (its packages unpacked into a folder)")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="rollout workers on both sides instead of the preset's (e.g. the machine's cores)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="start another round (a run of every system) only while the slowest round so far fits "
                        "in what is left of SECONDS; the table then covers the rounds that ran")
    p.add_argument("--markdown", type=Path, default=None, metavar="PATH",
                   help="also write the table of medians to PATH as Markdown (with the FPS per core)")
    add_run_args(p, timeout=1200.0)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    exit_cleanly_on_signals()
    if args.setup:
        setup_venv(args.venv)
        return
    preset = PRESETS[args.preset]
    if args.workers is not None:
        preset = with_workers(preset, args.workers)
    env_steps = args.env_steps or preset.env_steps
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    sf = SfPython.from_args(args)
    if "sf" in systems and not sf.exists():
        sys.exit(f"no Sample Factory python at {sf.python}: run with --setup first (or pass --sf-python)")
    variants = args.variant or [("ours", [])]
    labels = (["SF"] if "sf" in systems else []) + (["base"] if args.baseline else []) + \
        ([label for label, _ in variants] if "ours" in systems else [])
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="vs_sf_"))
    print(f"preset {args.preset}, {env_steps:,} env steps, {args.repeats} repeats, runs in {work}", flush=True)
    results = []
    started, slowest_round = time.time(), 0.0
    try:
        with revision_checkout(args.baseline, work) as base_repo:
            for i in range(args.repeats):
                if args.budget is not None and i > 0 and time.time() - started + slowest_round > args.budget:
                    print(f"stopped after {i} rounds: another would pass the budget of {args.budget:.0f} s",
                          flush=True)
                    break
                round_start = time.time()
                seed = args.first_seed + i
                if "sf" in systems:
                    wait_for_quiet(args.wait_quiet)
                    results.append(run_sf(sf, preset, work, seed, env_steps, args.sf_arg, args.timeout))
                    print_run(results[-1], preset.target)
                if base_repo is not None:
                    wait_for_quiet(args.wait_quiet)
                    results.append(run_ours(preset, work, seed, env_steps, args.overrides, args.timeout,
                                            base_repo, "base"))
                    print_run(results[-1], preset.target)
                for label, overrides in (variants if "ours" in systems else []):
                    wait_for_quiet(args.wait_quiet)
                    results.append(run_ours(preset, work, seed, env_steps, [*args.overrides, *overrides],
                                            args.timeout, system=label))
                    print_run(results[-1], preset.target)
                slowest_round = max(slowest_round, time.time() - round_start)
    finally:
        if args.work_dir is None and all(r.ok for r in results):
            shutil.rmtree(work, ignore_errors=True)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    summarize(results, preset.target, labels, args.markdown, cores if args.workers is not None else None)


if __name__ == "__main__":
    main()
