"""sf_hydra's training FPS next to the "dummy sampler" ceiling for the same env and workers.

    python benchmarks/throughput.py --repeats 3 --env-steps 300000 -- \\
        env=gym/cartpole hardware.num_workers=2 hardware.num_envs_per_worker=16

Arguments after `--` are Hydra overrides, passed to train.py and used to compose the config
that the dummy sampler builds its envs from.

- training FPS: `python train.py <overrides>` for --env-steps env frames (no early stop
  at a target return). FPS is env frames between the first and the last `perf/fps`
  TensorBoard report with a non-zero step count over the wall time between them
  (start-up excluded; reports every 5 s), median of --repeats runs. Same definition as
  in vs_sample_factory.py.
- ceiling: num_workers processes, each with num_envs_per_worker envs from
  `sf_hydra.envs.make_env`, stepped one after another with random actions (reset when an
  episode ends), no policy, no learner, no shared buffers, for the same total env frames
  (agent steps x env.frameskip). Timed from a barrier passed once every env is built and
  reset until the last worker is done. Median of --repeats runs.
- ratio = training / ceiling: the share of the raw env speed that training keeps.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    REPO,
    exit_cleanly_on_signals,
    fmt,
    median,
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

sys.path.insert(0, str(REPO / "src"))  # spawned children import sf_hydra too

REPORT_SEC = 5


# ----------------------------------------------------------------------------- config


def compose_config(overrides: Sequence[str]):
    """The same config train.py would build from these overrides (Hydra compose API)."""
    from hydra import compose, initialize_config_dir

    from sf_hydra.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("train", overrides=list(overrides))


# ----------------------------------------------------------------------------- training


def training_fps(overrides: Sequence[str], env_steps: int, seed: int, work: Path, timeout: float) -> Optional[float]:
    """Steady FPS of one `train.py` run (summary.json's figure if it had < 2 reports)."""
    train_dir = work / "train"
    fixed_budget = ["train_until_avg_return=null", f"logger.experiment_summaries_interval={REPORT_SEC}"]
    run_overrides = [*fixed_budget, *overrides, f"experiment=throughput_{seed}", f"train_dir={train_dir}",
                     f"seed={seed}", f"train_for_env_steps={env_steps}", "restart_behavior=overwrite"]
    log = work / f"train_{seed}.log"
    proc = run_tree(train_py_command(sys.executable, run_overrides), log, cwd=work, env=python_env(),
                    timeout=timeout)
    if proc.returncode != 0:
        print(f"  train.py failed (exit {proc.returncode}), log: {log}", flush=True)
        return None
    run_dir = train_dir / f"throughput_{seed}"
    fps = steady_fps(read_tb_scalars(run_dir, "perf/fps")) or read_summary(run_dir).get("fps")
    print(f"  training run {seed}: {fmt(fps)} FPS, wall {proc.wall_seconds:.0f} s, "
          f"peak RSS {proc.peak_rss_mb:,.0f} MB", flush=True)
    return fps


# ----------------------------------------------------------------------------- dummy sampler


def _dummy_worker(env_cfg: dict, worker: int, num_envs: int, agent_steps: int, seed: int, barrier, results) -> None:
    """Build the envs, wait for everyone, then step them round-robin with random actions."""
    from omegaconf import OmegaConf

    from sf_hydra.envs import make_env

    cfg = OmegaConf.create(env_cfg)
    envs = [make_env(cfg, seed=seed + worker * num_envs + i) for i in range(num_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=seed + worker * num_envs + i)
        env.action_space.seed(seed + worker * num_envs + i)
    barrier.wait(timeout=600)
    start = time.time()
    done_steps = 0
    while done_steps < agent_steps:
        for env in envs:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        done_steps += num_envs
    results.put((start, time.time(), done_steps))
    for env in envs:
        env.close()


def _collect(results, procs, timeout: float) -> list:
    """One result per worker; fail fast if a worker dies instead of waiting for the timeout."""
    import queue

    spans, deadline = [], time.time() + timeout
    while len(spans) < len(procs):
        try:
            spans.append(results.get(timeout=1.0))
        except queue.Empty:
            failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if failed or time.time() > deadline:
                raise RuntimeError(f"dummy sampler workers failed (exit codes {failed}) or timed out")
    return spans


def dummy_sampler_fps(env_cfg: dict, num_workers: int, num_envs: int, env_frames: int, seed: int,
                      timeout: float) -> float:
    """Env frames per second of num_workers processes stepping random actions, no learning."""
    frameskip = int(env_cfg.get("frameskip", 1))
    agent_steps = math.ceil(env_frames / frameskip / num_workers)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(num_workers), ctx.Queue()
    procs = [ctx.Process(target=_dummy_worker, args=(env_cfg, w, num_envs, agent_steps, seed, barrier, results))
             for w in range(num_workers)]
    for p in procs:
        p.start()
    try:
        spans = _collect(results, procs, timeout)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    frames = sum(s[2] for s in spans) * frameskip
    return frames / (max(s[1] for s in spans) - min(s[0] for s in spans))


# ----------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--env-steps", type=int, default=300_000, help="env frames per run (both measurements)")
    p.add_argument("--skip-training", action="store_true", help="measure only the dummy-sampler ceiling")
    p.add_argument("--timeout", type=float, default=1200.0, help="seconds before a run is abandoned")
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                   help="before each run, wait up to this long for the machine to be idle (shared machines)")
    p.add_argument("overrides", nargs="*", help="after `--`: Hydra overrides (env=..., hardware.num_workers=...)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    exit_cleanly_on_signals()
    from omegaconf import OmegaConf

    cfg = compose_config(args.overrides)
    env_cfg = OmegaConf.to_container(cfg.env, resolve=True)
    workers, envs = cfg.hardware.num_workers, cfg.hardware.num_envs_per_worker
    print(f"env {cfg.env.name} ({cfg.env.family}:{cfg.env.id}, frameskip {cfg.env.frameskip}), "
          f"{workers} workers x {envs} envs, {args.env_steps:,} env frames, {args.repeats} repeats", flush=True)

    ceilings: List[float] = []
    for i in range(args.repeats):
        wait_for_quiet(args.wait_quiet)
        ceilings.append(dummy_sampler_fps(env_cfg, workers, envs, args.env_steps, seed=i, timeout=args.timeout))
        print(f"  dummy sampler run {i}: {ceilings[-1]:,.0f} FPS", flush=True)

    training: List[Optional[float]] = []
    if not args.skip_training:
        work = Path(tempfile.mkdtemp(prefix="throughput_"))
        for i in range(args.repeats):
            wait_for_quiet(args.wait_quiet)
            training.append(training_fps(args.overrides, args.env_steps, i, work, args.timeout))
        if all(f is not None for f in training):
            shutil.rmtree(work, ignore_errors=True)

    train_med, ceil_med = median(training), median(ceilings)
    print()
    print_table(["median", "FPS"], [
        ["training (train.py)", fmt(train_med)],
        ["dummy sampler ceiling", fmt(ceil_med)],
        ["training / ceiling", fmt(ratio(train_med, ceil_med), ".2f")],
    ])


if __name__ == "__main__":
    main()
