"""Learning per frame: sf_hydra's shipped config vs Sample Factory 2.1.1's shipped defaults
for the same env, at the same frame budget, several seeds, runs alternating (SF, ours, ...).

    python benchmarks/vs_sample_factory.py --setup      # once: SF in its own venv
    python benchmarks/learning_vs_sample_factory.py --envs gym/cartpole gym/acrobot --seeds 3
    python benchmarks/learning_vs_sample_factory.py --envs doom/health_gathering --seeds 2 --env-steps 1000000

What is compared, per env (`ENVS` below):
- ours: `train.py env=<env>` with everything at the shipped config, except the budget
  (`train_for_env_steps`, which also sets the length of a decaying learning-rate schedule),
  no early stop (`train_until_avg_return=null`) and the seed;
- Sample Factory: its example entry point for the family with its defaults for the env (for
  gym envs, the recipe in `sf_examples/train_gym_env.py`'s docstring, the only one it ships, run
  through `benchmarks/sf_gym_env.py`, which registers any gym id as that example does CartPole),
  at the same budget and seed;
- on both sides the same sampling hardware: our config's `num_workers` x `num_envs_per_worker`
  (Sample Factory's per-family defaults assume 8+ cores) and the CPU as device. Atari is the
  exception: SF's sync mode there needs workers x envs x rollout (128) to be a whole number of
  its 1024-sample iterations, so SF gets 2 workers x 4 envs (its default is 8 envs, 8 x 1).

The figure is the average return over the last 100 episodes, in the env's own units, as each
system last reported it before the budget ran out (ours: TensorBoard `episode/return`; SF:
TensorBoard `policy_stats/avg_true_objective`, its 100-episode average of the env's reward
before its own shaping wrappers, divided by its spec's reward scaling where it has one).
Where the two sides' scenarios pay differently (doom/health_gathering: SF ships its own .cfg), the
figure is what both measure alike: the game tics an episode lasted. Both count frames the same
way: agent steps x frameskip.

The table gives, per env and system, the median over seeds with the range, each seed's value,
the median FPS (start-up excluded) and wall seconds (start-up included), and the difference
ours - SF of the medians in units of SF's range (`gap / SF spread`; about 0 or above is "as
good per frame").
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    Point,
    add_run_args,
    exit_cleanly_on_signals,
    fmt,
    median,
    peer_dir,
    print_table,
    run_tree,
    steady_fps,
    wait_for_quiet,
)
from vs_sample_factory import Preset, RunResult, SfPython, parse_sf_log, read_tb_scalars, run_ours  # noqa: E402

# SF's gym example (its docstring's CartPole recipe) through our launcher, which registers any gym id
GYM_RECIPE = [str(Path(__file__).resolve().parent / "sf_gym_env.py"), "--algo=APPO", "--use_rnn=False",
              "--recurrence=1",
              "--with_vtrace=False", "--batch_size=512", "--reward_scale=0.1"]
DOOM = ["-m", "sf_examples.vizdoom.train_vizdoom"]


@dataclass
class EnvCase:
    """One env on both sides."""

    ours: str  # our env config, `env=<ours>`
    sf_args: List[str]  # after the SF venv's python: module and its env flag
    env_steps: int  # default frame budget
    workers: Tuple[int, int]  # num_workers, num_envs_per_worker (ours' shipped values here)
    sf_reward_scaling: float = 1.0  # SF's env spec multiplies the env's reward by this
    seeds: int = 3
    sf_extra: List[str] = field(default_factory=list)
    # "return"; "tics_alive": where the two sides' scenarios pay differently, the game tics an episode
    # lasted (ours: TensorBoard `episode/length` x frameskip; SF: its objective / sf_reward_scaling)
    measure: str = "return"
    frameskip: int = 1
    # SF's num_workers x num_envs_per_worker where its defaults cannot take ours: its sync mode (Atari)
    # needs workers x envs x rollout to be a whole number of training batches
    sf_workers: Optional[Tuple[int, int]] = None


def _doom(ours: str, sf_env: str, steps: int, scaling: float = 1.0, seeds: int = 2,
          measure: str = "return") -> EnvCase:
    return EnvCase(ours, DOOM + [f"--env={sf_env}"], steps, (2, 8), scaling, seeds, measure=measure, frameskip=4)


ENVS: Dict[str, EnvCase] = {
    "gym/cartpole": EnvCase("gym/cartpole", GYM_RECIPE + ["--env=CartPole-v1"], 500_000, (2, 16)),
    "gym/acrobot": EnvCase("gym/acrobot", GYM_RECIPE + ["--env=Acrobot-v1"], 500_000, (2, 16)),
    "doom/basic": _doom("doom/basic", "doom_basic", 300_000, scaling=0.01, seeds=3),
    # SF ships its own health_gathering.cfg: 0.01 per tic alive and no death penalty, where ViZDoom's
    # (ours) pays 1 per tic and -100 on death. Both sides' figure: tics alive per episode (at most 2100).
    "doom/health_gathering": _doom("doom/health_gathering", "doom_health_gathering", 1_000_000, scaling=0.01,
                                   measure="tics_alive"),
    "doom/defend_the_line": _doom("doom/defend_the_line", "doom_defend_the_line", 1_000_000),
    "doom/my_way_home": _doom("doom/my_way_home", "doom_my_way_home", 1_000_000),
    "doom/deadly_corridor": _doom("doom/deadly_corridor", "doom_deadly_corridor", 1_000_000, scaling=0.01),
    "mujoco/halfcheetah": EnvCase("mujoco/halfcheetah", ["-m", "sf_examples.mujoco.train_mujoco",
                                                         "--env=mujoco_halfcheetah"], 1_000_000, (2, 32)),
    # SF's Atari defaults: 8 envs (8 x 1), rollout 128, sync PPO on 4 x 256: here 2 workers x 4 envs
    "atari/pong": EnvCase("atari/pong", [str(Path(__file__).resolve().parent / "sf_atari_env.py"), "--env=atari_pong"],
                          1_000_000, (2, 8), seeds=1, sf_workers=(2, 4)),
}


# ----------------------------------------------------------------------------- Sample Factory


def read_sf_scalars(summary_dir: Path, tag: str) -> List[Point]:
    """(wall_time, env frames, value) of one scalar in SF's `.summary/0` event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if not summary_dir.is_dir():
        return []
    acc = EventAccumulator(str(summary_dir), size_guidance={"scalars": 0})
    acc.Reload()
    if tag not in acc.Tags()["scalars"]:
        return []
    return sorted((e.wall_time, float(e.step), e.value) for e in acc.Scalars(tag))


def sf_command(python: str, case: EnvCase, train_dir: Path, seed: int, env_steps: int) -> List[str]:
    n, k = case.sf_workers or case.workers
    return [python, *case.sf_args, *case.sf_extra, "--device=cpu", "--with_wandb=False",
            "--experiment_summaries_interval=5", f"--num_workers={n}", f"--num_envs_per_worker={k}",
            f"--experiment=sf_{seed}", f"--train_dir={train_dir}", f"--seed={seed}",
            f"--train_for_env_steps={env_steps}"]


def run_sf(sf: SfPython, case: EnvCase, work: Path, seed: int, env_steps: int, timeout: float) -> RunResult:
    run_dir = _fresh(work / f"sf_{seed}")
    log = run_dir / "stdout.log"
    train_dir = work / "sf_train"
    proc = run_tree(sf_command(sf.python, case, train_dir, seed, env_steps), log, cwd=run_dir, env=sf.env(),
                    timeout=timeout)
    summary = train_dir / f"sf_{seed}" / ".summary" / "0"
    # SF's Atari runs write no policy_stats scalars: then its log's "Avg episode reward" lines
    points = read_sf_scalars(summary, "policy_stats/avg_true_objective") or (
        parse_sf_log(log.read_text(errors="replace"))[1] if log.exists() else [])
    returns = [(w, s, v / case.sf_reward_scaling) for w, s, v in points]
    progress = read_sf_scalars(summary, "perf/_fps")
    ok = proc.returncode == 0
    note = "" if ok else (f"timeout, log: {log}" if proc.returncode is None else f"exit {proc.returncode}, log: {log}")
    return RunResult("SF", seed, ok, fps=steady_fps([(w, s, None) for w, s, _ in progress]),
                     env_steps=returns[-1][1] if returns else None, wall_seconds=proc.wall_seconds,
                     last_return=returns[-1][2] if returns else None, peak_rss_mb=proc.peak_rss_mb,
                     peak_pss_mb=proc.peak_pss_mb, procs=proc.peak_procs, other_cpu=proc.other_cpu, note=note)


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


# ----------------------------------------------------------------------------- ours


def our_preset(case: EnvCase) -> Preset:
    n, k = case.workers
    return Preset([], [f"env={case.ours}", f"hardware.num_workers={n}", f"hardware.num_envs_per_worker={k}"],
                  env_steps=case.env_steps)


def ours_tics_alive(exp_dir: Path, frameskip: int) -> Optional[float]:
    """The last 100-episode average length our run reported, in game tics (agent steps x frameskip)."""
    lengths = read_tb_scalars(exp_dir, "episode/length")
    return lengths[-1][2] * frameskip if lengths else None


# ----------------------------------------------------------------------------- report


def print_run(env: str, r: RunResult, measure: str = "return") -> None:
    what = "last avg return" if measure == "return" else f"last avg {measure.replace('_', ' ')}"
    print(f"[{env} {r.system:4s} seed {r.seed}] {what} {fmt(r.last_return, '.2f')}"
          f" at {fmt(r.env_steps)} frames  fps {fmt(r.fps)}  wall {fmt(r.wall_seconds, '.0f')} s"
          f"  other CPU {fmt(r.other_cpu, '.2f')} cores  {r.note}", flush=True)


def spread(values: Sequence[Optional[float]]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "-"
    text = fmt(median(got), ".1f")
    return text if len(got) == 1 else f"{text} [{min(got):.1f}, {max(got):.1f}]"


def summary_rows(env: str, budget: int, results: List[RunResult]) -> List[List[str]]:
    sf = [r for r in results if r.system == "SF"]
    ours = [r for r in results if r.system == "ours"]
    sf_ret = [r.last_return for r in sf]
    our_ret = [r.last_return for r in ours]
    gap = None
    if median(our_ret) is not None and median(sf_ret) is not None:
        got = [v for v in sf_ret if v is not None]
        width = max(got) - min(got) if len(got) > 1 else 0.0
        gap = (median(our_ret) - median(sf_ret)) / width if width > 0 else None
    each = "  ".join(f"{fmt(a, '.1f')}/{fmt(b, '.1f')}" for a, b in zip(sf_ret, our_ret))
    return [[env, f"{budget:,}", str(max(len(sf), len(ours))), spread(sf_ret), spread(our_ret),
             fmt(gap, "+.2f"), each, fmt(median(r.fps for r in sf)), fmt(median(r.fps for r in ours)),
             fmt(median(r.wall_seconds for r in sf), ".0f"), fmt(median(r.wall_seconds for r in ours), ".0f")]]


HEADERS = ["env", "frames", "seeds", "SF median [min, max]", "ours median [min, max]", "gap / SF spread",
           "per seed SF/ours", "SF FPS", "our FPS", "SF wall s", "our wall s"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", nargs="+", choices=sorted(ENVS), default=sorted(ENVS))
    p.add_argument("--seeds", type=int, default=None, help="seeds per system (default: the env's)")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--env-steps", type=int, default=None, help="frame budget (default: the env's)")
    p.add_argument("--systems", default="sf,ours", help="comma list: sf, ours")
    p.add_argument("--venv", type=Path, default=peer_dir("sf_venv"),
                   help="Sample Factory's venv, as vs_sample_factory.py --setup makes it (default: %(default)s)")
    p.add_argument("--sf-python", default=None, metavar="PATH",
                   help="run Sample Factory with this interpreter instead of the venv's")
    p.add_argument("--sf-pythonpath", default=None, metavar="DIRS",
                   help="PYTHONPATH for Sample Factory's runs only (its packages unpacked into a folder)")
    add_run_args(p, timeout=3600.0)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    exit_cleanly_on_signals()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    sf = SfPython.from_args(args)
    if "sf" in systems and not sf.exists():
        sys.exit(f"no Sample Factory python at {sf.python}: run benchmarks/vs_sample_factory.py --setup first")
    root = args.work_dir or Path(tempfile.mkdtemp(prefix="learn_vs_sf_"))
    rows, all_ok = [], True
    for env in args.envs:
        case = ENVS[env]
        budget = args.env_steps or case.env_steps
        seeds = args.seeds or case.seeds
        work = root / env.replace("/", "_")
        print(f"{env}: {budget:,} frames, {seeds} seeds, runs in {work}", flush=True)
        results: List[RunResult] = []
        for seed in range(args.first_seed, args.first_seed + seeds):
            if "sf" in systems:
                wait_for_quiet(args.wait_quiet)
                results.append(run_sf(sf, case, work, seed, budget, args.timeout))
                print_run(env, results[-1], case.measure)
            if "ours" in systems:
                wait_for_quiet(args.wait_quiet)
                results.append(run_ours(our_preset(case), work, seed, budget, args.overrides, args.timeout))
                if case.measure == "tics_alive":
                    results[-1].last_return = ours_tics_alive(work / "ours_train" / f"ours_{seed}", case.frameskip)
                print_run(env, results[-1], case.measure)
        all_ok &= all(r.ok for r in results)
        rows += summary_rows(env, budget, results)
        print()
        print_table(HEADERS, rows)
        print(flush=True)
    if args.work_dir is None and all_ok:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
