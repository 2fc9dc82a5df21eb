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

    python benchmarks/eval_cost.py --cpu RUN_DIR --widths 1 10 --episodes 10 --repeats 5 --every 20000

`--cpu RUN_DIR`: instead, the CPU seconds (this process's time.process_time, torch with 1 thread, plus its
child processes' CPU time: a ViZDoom engine runs in one of its own) that one evaluation of a
trained run's last checkpoint costs in this process: the evaluation process's own code (sf_hydra.evaluation
Evaluator.evaluate: the store's weights loaded, `--episodes` deterministic games of the same seeds), with
at most `--widths` games at once (EvalSettings.max_envs; 1: one game after another), alternated `--repeats`
times; prints the median CPU seconds per evaluation and per game step of each width, and its share of the
training's CPU time at the run's FPS (summary.json, or `--fps`) with an evaluation every `--every` env steps
on this machine's cores.
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


def latest_checkpoint(run_dir: Path) -> Path:
    files = sorted((run_dir / "checkpoints").glob("checkpoint_*.ckpt"))
    if not files:
        raise SystemExit(f"no checkpoint_*.ckpt in {run_dir / 'checkpoints'}")
    return files[-1]


def cpu_per_evaluation(args) -> int:
    """The `--cpu` mode: CPU seconds of one in-process evaluation, per width (torch and sf_hydra imported here:
    the default mode only starts train.py processes)."""
    import os
    import time

    import psutil
    import torch
    from omegaconf import OmegaConf

    from sf_hydra.app.enjoy import load_policy
    from sf_hydra.envs import make_env
    from sf_hydra.evaluation.process import EvalRequest, EvalSettings, Evaluator
    from sf_hydra.models.recipe import model_recipe, plain
    from sf_hydra.sampler.policy_store import PolicyStore

    me = psutil.Process()

    def cpu_now() -> float:
        children = 0.0
        for child in me.children(recursive=True):
            try:
                times = child.cpu_times()
                children += times.user + times.system
            except psutil.Error:
                pass
        return time.process_time() + children

    torch.set_num_threads(1)
    run_dir = Path(args.cpu).absolute()
    cfg = OmegaConf.load(run_dir / "config.yaml")
    probe = make_env(cfg.env)
    model = load_policy(cfg, latest_checkpoint(run_dir), probe.observation_space, probe.action_space)
    probe.close()
    store = PolicyStore(model)
    store.publish(model, 1)
    work = Path(tempfile.mkdtemp(prefix="eval_cpu_"))
    evaluators = {w: Evaluator(EvalSettings(
        run_dir=str(work / f"w{w}"), seed=0, num_policies=1, episodes=args.episodes, deterministic=True,
        max_episode_steps=None, video_every=0, video_format="gif", video_frames=None, env=plain(cfg.env),
        model=model_recipe(cfg), max_envs=w), [store])
        for w in args.widths}
    cpu = {w: [] for w in args.widths}
    games = {}
    try:
        for r in range(args.repeats):
            for w, evaluator in evaluators.items():
                t = cpu_now()
                record = evaluator.evaluate(EvalRequest(r, 0, [0], [1]))
                cpu[w].append(cpu_now() - t)
                games[w] = [(e["return"], e["length"]) for e in record["policies"][0]["episodes"]]
    finally:
        for evaluator in evaluators.values():
            evaluator.close()
        shutil.rmtree(work, ignore_errors=True)
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    fps = args.fps or summary.get("fps")
    cores = os.cpu_count() or 1
    steps = sum(length for _, length in games[args.widths[0]])
    rows = []
    for w in args.widths:
        med = median(cpu[w])
        share = med / (cores * args.every / fps) if fps else None
        rows.append([str(w), fmt(med, ".3f"), fmt(1e6 * med / steps, ".0f"), fmt(share and 100 * share, ".1f"),
                     "yes" if games[w] == games[args.widths[0]] else "no"])
    print(f"{run_dir.name}: {args.episodes} games, {steps} steps (lengths {[n for _, n in games[args.widths[0]]]}); "
          f"training {fmt(fps)} FPS on {cores} cores, an evaluation every {args.every} env steps")
    print_table(["games at once", "CPU s / evaluation (median)", "CPU us / game step", "% of training CPU",
                 "same games as the first"], rows)
    print(json.dumps({"cpu_seconds": cpu, "fps": fps, "every": args.every, "cores": cores, "steps": steps}))
    return 0


def main() -> int:
    exit_cleanly_on_signals()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--env-steps", type=int, default=200_000)
    parser.add_argument("--eval", nargs="*", default=list(DEFAULT_EVAL), help="the `on` variant's eval overrides")
    parser.add_argument("--quiet-wait", type=float, default=0.0, help="seconds to wait for a quiet machine per run")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--cpu", default=None, help="a trained run's directory: measure one evaluation's CPU time")
    parser.add_argument("--widths", type=int, nargs="+", default=[1, 10], help="--cpu: games at once (max_envs)")
    parser.add_argument("--episodes", type=int, default=10, help="--cpu: games per evaluation")
    parser.add_argument("--every", type=int, default=20_000, help="--cpu: env steps between evaluations")
    parser.add_argument("--fps", type=float, default=None, help="--cpu: training FPS (default: the run's summary)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run (after --)")
    args = parser.parse_args()
    if args.cpu:
        return cpu_per_evaluation(args)
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
