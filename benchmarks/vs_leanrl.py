"""sf_hydra against LeanRL, the same PPO recipe on HalfCheetah-v4, same machine, runs alternating.

    python benchmarks/vs_leanrl.py --setup                       # venv + LeanRL checkout (needs internet)
    python benchmarks/vs_leanrl.py --seeds 1 2 3                 # 204,800 frames a run
    python benchmarks/vs_leanrl.py --systems ours leanrl --env-steps 1024000 --seeds 1

LeanRL (github.com/pytorch-labs/LeanRL) is CleanRL's single-file PPO made fast with `torch.compile`
and CUDA graphs. Its `ppo_continuous_action.py` (eager; system `leanrl`) and
`ppo_continuous_action_torchcompile.py --compile` (system `leanrl_compile`) run unchanged from
their checkout, in a venv of their own (gymnasium 0.29: their wrappers predate gymnasium 1's
signatures), on the CPU (`--no-cuda`), with `WANDB_MODE=disabled`.

The work is the same on both sides (`RECIPE` below; docs in benchmarks/README.md):
- their defaults: HalfCheetah-v4, 2,048 frames per iteration, 10 epochs of 32 minibatches of 64
  (320 optimizer steps an iteration), Adam lr 3e-4 decayed linearly to 0 over the budget, eps
  1e-5, gamma 0.99, GAE lambda 0.95, advantages normalized per minibatch, ratio and value
  clipped at 0.2, value loss 0.5 x 0.5 x MSE, no entropy bonus, gradients clipped at 0.5;
  separate actor and critic MLPs 64-64 tanh, orthogonal init (gain sqrt 2, action head 0.01),
  a state-independent log std starting at 0, observations normalized by running statistics,
  actions clipped to the bounds;
- ours: synchronous PPO (`algo=ppo`, the mujoco family's) with those values, 2 rollout workers x
  1 env x 1,024 steps (one iteration of 2,048 frames; LeanRL steps 1 env x 2,048);
- where the two designs differ, ours keeps its own: value targets normalized by running
  statistics (LeanRL normalizes and clips rewards with gymnasium's NormalizeReward), the ratio
  clipped to [1/1.2, 1.2] (LeanRL [0.8, 1.2]), observations clipped at 5 standard deviations
  (LeanRL 10);
- no early stop on either side; every run the same frame budget; one torch thread a process
  (OMP_NUM_THREADS=1 for LeanRL: with 2 threads on 2 cores its small nets ran ~10x slower here;
  `--leanrl-threads 0` leaves torch's default).

Printed per run and as medians per system: wall seconds launch to exit (start-up and, for
`leanrl_compile`, compilation included), FPS over that wall time, the steady FPS (LeanRL's own
`speed` figure, from its third iteration on; ours: TensorBoard `perf/env_steps` between the first
and the last report), and the return: the mean of the last 20 episodes at the end (LeanRL's
`episodic_return` / `returns`, ours with `logger.stats_avg=20`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    exit_cleanly_on_signals,
    fmt,
    median,
    peer_dir,
    print_table,
    python_env,
    ratio,
    read_summary,
    read_tb_scalars,
    run_tree,
    steady_fps,
    train_py_command,
    wait_for_quiet,
)

LEANRL_URL = "https://github.com/pytorch-labs/LeanRL"
LEANRL_PACKAGES = ["gymnasium[mujoco]==0.29.1", "mujoco<3", "tensordict", "tyro", "wandb", "tqdm", "numpy<2"]
TORCH_VERSION = "2.13.0"
ENV_ID = "HalfCheetah-v4"
ITERATION = 2048  # frames per PPO iteration on both sides
SCRIPTS = {"leanrl": ("ppo_continuous_action.py", []),
           "leanrl_compile": ("ppo_continuous_action_torchcompile.py", ["--compile"])}
# ours: synchronous PPO, as LeanRL; ours_async: the same recipe as APPO (workers sample while the learner trains)
OURS = {"ours": [], "ours_async": ["algo.async_rl=true"]}
SYSTEMS = (*OURS, *SCRIPTS)

# LeanRL's defaults, spelled as our keys (value loss: ours is coeff x MSE, theirs 0.5 x vf_coef 0.5 x MSE).
RECIPE = [
    "env=mujoco/halfcheetah", f"env.id={ENV_ID}", "algo=ppo",
    "hardware.num_workers=2", "hardware.num_envs_per_worker=1", "algo.rollout=1024",
    "algo.batch_size=64", "algo.num_batches_per_epoch=32", "algo.num_epochs=10", "algo.shuffle_minibatches=true",
    "algo.learning_rate=0.0003", "algo.lr_schedule=linear_decay", "algo.adam_eps=1e-5",
    "algo.gamma=0.99", "algo.gae_lambda=0.95", "algo.ppo_clip_ratio=0.2", "algo.ppo_clip_value=0.2",
    "algo.value_loss_coeff=0.25", "algo.exploration_loss_coeff=0.0", "algo.max_grad_norm=0.5",
    "algo.value_bootstrap=false", "algo.normalize_input=true", "algo.normalize_returns=true",
    "model.actor_critic_share_weights=false", "model.encoder_mlp_layers=[64,64]", "model.nonlinearity=tanh",
    "model.policy_initialization=orthogonal", "model.policy_init_gain=1.4142135", "model.action_head_init_gain=0.01",
    "model.adaptive_stddev=false", "model.initial_stddev=1.0",
    "logger.stats_avg=20", "logger.experiment_summaries_interval=5", "train_until_avg_return=null",
]

_NUMBER = r"(-?[\d.]+(?:e[-+]?\d+)?|nan)"
_SPEED = re.compile(r"speed:\s*" + _NUMBER + r" sps")
_RETURN = re.compile(r"(?:episodic_return=|returns:)\s*" + _NUMBER)


@dataclass
class Run:
    system: str
    seed: int
    exit: Optional[int]
    frames: Optional[float]
    wall: float
    steady: Optional[float]  # frames per second after start-up (LeanRL's `speed`, ours from TensorBoard)
    last_return: Optional[float]  # mean of the last 20 episodes at the end
    other_cpu: float

    @property
    def fps(self) -> Optional[float]:
        return self.frames / self.wall if self.frames and self.exit == 0 else None


def parse_leanrl_output(text: str) -> tuple:
    """(speed, return) of the last progress description LeanRL's tqdm bar printed (it rewrites the bar with
    carriage returns; the description changes every 10 iterations): None where it printed none."""
    speed = ret = None
    for line in re.split(r"[\r\n]", text):
        m = _SPEED.search(line)
        if m:
            speed = float(m.group(1))
            r = _RETURN.search(line)
            ret = float(r.group(1)) if r else None
    return speed, ret


def leanrl_command(python: str, checkout: Path, system: str, seed: int, env_steps: int) -> List[str]:
    script, extra = SCRIPTS[system]
    return [python, str(checkout / "leanrl" / script), f"--env-id={ENV_ID}", f"--seed={seed}",
            f"--total-timesteps={env_steps}", "--no-cuda", *extra]


def leanrl_env(threads: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["WANDB_MODE"] = "disabled"
    if threads > 0:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env


def run_leanrl(args, system: str, seed: int, work: Path) -> Run:
    folder = work / f"{system}_{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "output.log"
    proc = run_tree(leanrl_command(str(args.venv / "bin" / "python"), args.leanrl, system, seed, args.env_steps),
                    log, cwd=folder, env=leanrl_env(args.leanrl_threads), timeout=args.timeout)
    speed, ret = parse_leanrl_output(log.read_text(errors="replace"))
    frames = (args.env_steps // ITERATION) * ITERATION  # it runs whole iterations
    return Run(system, seed, proc.returncode, frames, proc.wall_seconds, speed, ret, proc.other_cpu)


def our_overrides(system: str, seed: int, env_steps: int, train_dir: Path, extra: Sequence[str]) -> List[str]:
    return [*RECIPE, *OURS[system], f"seed={seed}", f"train_for_env_steps={env_steps}", f"train_dir={train_dir}",
            f"experiment={system}_{seed}", "restart_behavior=overwrite", *extra]


def run_ours(args, system: str, seed: int, work: Path) -> Run:
    train_dir = work / "ours"
    cmd = train_py_command(sys.executable, our_overrides(system, seed, args.env_steps, train_dir, args.overrides))
    proc = run_tree(cmd, work / f"{system}_{seed}.log", cwd=work, env=python_env(), timeout=args.timeout)
    run_dir = train_dir / f"{system}_{seed}"
    summary = read_summary(run_dir)
    return Run(system, seed, proc.returncode, summary.get("env_steps"), proc.wall_seconds,
               steady_fps(read_tb_scalars(run_dir, "perf/env_steps")), summary.get("avg_return"), proc.other_cpu)


def print_run(r: Run) -> None:
    print(f"[{r.system} seed {r.seed}] frames {fmt(r.frames)}  wall {r.wall:.1f} s  FPS {fmt(r.fps)}  "
          f"steady {fmt(r.steady)}  return {fmt(r.last_return, '.1f')}  other CPU {r.other_cpu:.2f} cores  "
          f"exit {r.exit}", flush=True)


def summary_rows(runs: Sequence[Run], systems: Sequence[str]) -> List[List[str]]:
    """One row per system: medians (and each run's figure), ratios of ours against that system."""
    ours = [r for r in runs if r.system == "ours"]
    ours_fps, ours_steady = median(r.fps for r in ours), median(r.steady for r in ours)
    rows = []
    for system in systems:
        mine = [r for r in runs if r.system == system]
        fps, steady = median(r.fps for r in mine), median(r.steady for r in mine)
        rows.append([system, str(len(mine)), fmt(median(r.wall for r in mine), ".1f"), fmt(fps),
                     fmt(ratio(ours_fps, fps), ".2f"), fmt(steady), fmt(ratio(ours_steady, steady), ".2f"),
                     fmt(median(r.last_return for r in mine), ".1f"),
                     " / ".join(fmt(r.last_return, ".0f") for r in mine)])
    return rows


def setup(venv: Path, checkout: Path) -> None:
    """The venv LeanRL runs in (torch first: pip takes the local CPU wheel) and, if absent, its checkout."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install"]
    subprocess.run(pip + [f"torch=={TORCH_VERSION}"], check=True)
    subprocess.run(pip + LEANRL_PACKAGES, check=True)
    if not (checkout / "leanrl").is_dir():
        subprocess.run(["git", "clone", "--depth=1", LEANRL_URL, str(checkout)], check=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", action="store_true", help="create --venv and clone LeanRL into --leanrl, then exit")
    parser.add_argument("--venv", type=Path, default=peer_dir("leanrl_venv"),
                        help="the venv LeanRL runs in (default: %(default)s)")
    parser.add_argument("--leanrl", type=Path, default=peer_dir("leanrl"),
                        help="LeanRL's checkout (default: %(default)s)")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=["ours", "ours_async", "leanrl"],
                        help="leanrl_compile: LeanRL's torch.compile script (benchmarks/README.md: its state on CPU)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--env-steps", type=int, default=100 * ITERATION, help="frames a run (whole iterations)")
    parser.add_argument("--leanrl-threads", type=int, default=1, help="torch threads for LeanRL (0: its default)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds before a run is killed")
    parser.add_argument("--quiet-wait", type=float, default=60.0,
                        help="seconds to wait at most, before each run, for the machine's other processes to calm")
    parser.add_argument("overrides", nargs="*", help="more train.py overrides for our runs (after --)")
    args = parser.parse_args(argv)
    if args.env_steps % ITERATION:
        parser.error(f"--env-steps={args.env_steps}: a multiple of {ITERATION} (one iteration on both sides)")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.setup:
        setup(args.venv, args.leanrl)
        return
    missing = [str(p) for p in (args.venv / "bin" / "python", args.leanrl / "leanrl") if not p.exists()]
    if any(s in SCRIPTS for s in args.systems) and missing:
        sys.exit(f"missing {', '.join(missing)}: run `python benchmarks/vs_leanrl.py --setup` first")
    exit_cleanly_on_signals()
    work = Path(tempfile.mkdtemp(prefix="vs_leanrl_"))
    runs: List[Run] = []
    try:
        for seed in args.seeds:  # each seed's runs back to back: the machine's drift hits every system alike
            for system in args.systems:
                wait_for_quiet(args.quiet_wait)
                run = run_ours(args, system, seed, work) if system in OURS else run_leanrl(args, system, seed, work)
                runs.append(run)
                print_run(run)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{ENV_ID}, {args.env_steps:,} frames a run, medians of {len(args.seeds)} seeds")
    print_table(["system", "runs", "wall s", "FPS (wall)", "ours / it", "steady FPS", "ours / it",
                 "return (last 20)", "per run"], summary_rows(runs, args.systems))


if __name__ == "__main__":
    main()
