"""What evaluation during training costs the training FPS: the same run with and without `eval.*`.

    python benchmarks/eval_cost.py --repeats 3 --env-steps 200000 -- \\
        env=gym/cartpole hardware.num_workers=2 hardware.num_envs_per_worker=16

Runs `python train.py <overrides>` alternately without evaluation (`off`) and with the
evaluation overrides of `--eval` (`on`; default: every 20000 env steps, 10 games), `--repeats`
times each (off, on, off, on, ...: a busy machine slows both alike). FPS is the steady training
FPS (env frames between the first and last non-zero `perf/fps` TensorBoard report over the wall
time between them: start-up excluded), as benchmarks/throughput.py measures it; no run stops
early at a target return. Prints each run's FPS and evaluations done, then the median FPS of
each variant and on / off.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    REPO,
    exit_cleanly_on_signals,
    fmt,
    median,
    print_table,
    python_env,
    ratio,
    read_tb_scalars,
    run_tree,
    steady_fps,
    train_py_command,
    wait_for_quiet,
)

sys.path.insert(0, str(REPO / "src"))

DEFAULT_EVAL = ("eval.every_env_steps=20000", "eval.episodes=10")


def one_run(variant: str, index: int, args, work: Path) -> tuple:
    """(steady FPS, evaluations written) of one training run."""
    run_dir = work / f"{variant}_{index}"
    overrides = [f"run_dir={run_dir}", f"train_for_env_steps={args.env_steps}", "train_until_avg_return=null",
                 "logger.experiment_summaries_interval=2", "logger.progress=lines", "save_every_sec=1000000",
                 *args.overrides]
    if variant == "on":
        overrides += list(args.eval)
    wait_for_quiet(args.quiet_wait)
    run_tree([sys.executable, *train_py_command(sys.executable, overrides)[1:]], run_dir.with_suffix(".log"), cwd=work,
             env=python_env(), timeout=args.timeout)
    fps = steady_fps(read_tb_scalars(run_dir, "perf/fps"))
    jsonl = run_dir / "eval" / "evaluations.jsonl"
    evaluations = len(jsonl.read_text().splitlines()) if jsonl.is_file() else 0
    return fps, evaluations


def main() -> int:
    exit_cleanly_on_signals()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--env-steps", type=int, default=200_000)
    parser.add_argument("--eval", nargs="*", default=list(DEFAULT_EVAL), help="the `on` variant's eval overrides")
    parser.add_argument("--quiet-wait", type=float, default=0.0, help="seconds to wait for a quiet machine per run")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run (after --)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="eval_cost_"))
    results = {"off": [], "on": []}
    try:
        for i in range(args.repeats):
            for variant in ("off", "on"):
                fps, evaluations = one_run(variant, i, args, work)
                results[variant].append(fps)
                print(f"run {i} {variant}: {fmt(fps)} FPS, {evaluations} evaluations", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    off, on = median(results["off"]), median(results["on"])
    print()
    print_table(["variant", "median FPS", "runs", "vs off"],
                [["off", fmt(off), str(len(results["off"])), "1.00"],
                 ["on", fmt(on), str(len(results["on"])), fmt(ratio(on, off), ".3f")]])
    print(json.dumps({"off": results["off"], "on": results["on"], "eval": args.eval, "overrides": args.overrides}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
