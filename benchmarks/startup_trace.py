"""Start-up's critical path: when each phase of one `train.py` run begins and ends, in seconds since
the process started (interpreter start-up included), and the main process's CPU seconds by then.

    python benchmarks/startup_trace.py                       # CartPole, 2048 steps, 3 runs
    python benchmarks/startup_trace.py --repeats 5 -- env=doom/basic train_for_env_steps=4000

Each run is a fresh process that runs train.py's entry point (sf_hydra.app.cli.train_main) with
timestamps around its phases: the command line's checks, the fork server's start, every Hydra
compose (the checks'; before the command line was composed once, hydra.main's two: `get_mode`,
then the run's), the job (hydra.main's, or run_job on the checks' compose), the env stage, the sampler's launch, the
imports of torch, torchmetrics, torch._dynamo and Lightning, the Trainer, fit, the final
checkpoint, the sampler's stop, and the exit. The wrappers sit on the functions (not in the
code), so a revision's code is traced as it is: `--repo DIR` traces another checkout (a folder
with train.py and src/). Printed: each event's median over the runs, wall and CPU; on a quiet
machine the learner process is CPU-bound when wall - CPU stays flat, and its CPU is the path.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]
# Modules whose import is timed (from its first import to its end, nested imports included).
TIMED_IMPORTS = ("hydra", "numpy", "gymnasium", "torch", "sf_hydra.sampler.sampler", "sf_hydra.app.train", "lightning",
                 "sf_hydra.learner.ppo_learner", "torchmetrics", "scipy.signal", "matplotlib", "torch._dynamo",
                 "tensorboard", "lightning.pytorch.trainer.trainer")


# ----------------------------------------------------------------------------- the traced run (child)
def _process_start() -> float:
    """The epoch time this process started (from /proc: clock ticks since boot)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


class Tracer:
    def __init__(self, out: str):
        self.start, self.pid, self.out = _process_start(), os.getpid(), out
        self.events = []

    def mark(self, what: str) -> None:
        if os.getpid() == self.pid:  # not in a forked child
            self.events.append((what, time.time() - self.start, time.process_time()))

    def wrap(self, owner, name: str, label: str = "") -> None:
        original = getattr(owner, name)
        label = label or name

        @functools.wraps(original)
        def traced(*args, **kwargs):
            self.mark(f"{label} begins")
            try:
                return original(*args, **kwargs)
            finally:
                self.mark(f"{label} ends")

        setattr(owner, name, traced)

    def save(self) -> None:
        if os.getpid() == self.pid:
            with open(self.out, "w") as f:
                json.dump(self.events, f)


class ImportWatch(importlib.abc.MetaPathFinder):
    """Marks the first import of each of TIMED_IMPORTS, and wraps functions of the modules of `hooks`
    ({module: callback(module)}) once they are loaded (before that, wrapping would import them)."""

    def __init__(self, tracer: Tracer, hooks: dict):
        self.tracer, self.hooks, self.done, self.busy = tracer, hooks, set(), set()

    def find_spec(self, name, path=None, target=None):
        # importlib.util.find_spec asks too (without importing): only an exec_module marks a module done
        if name in self.done or name in self.busy or (name not in TIMED_IMPORTS and name not in self.hooks):
            return None
        self.busy.add(name)
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)  # imports nothing
        finally:
            self.busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        run = spec.loader.exec_module

        def exec_module(module):
            self.done.add(name)
            self.tracer.mark(f"import {name} begins")
            run(module)
            self.tracer.mark(f"import {name} ends")
            if name in self.hooks:
                self.hooks[name](module)

        spec.loader.exec_module = exec_module
        return spec


def traced_run(out: str, argv) -> None:
    tracer = Tracer(out)
    tracer.mark("tracer starts")
    t = tracer.wrap
    hooks = {
        "sf_hydra.app.train": lambda m: [t(m, n) for n in ("check_before_start", "checked_plan",
                                                       "launch_sampler", "build_trainer", "write_summary")],
        "sf_hydra.sampler.sampler": lambda m: (t(m.Sampler, "__init__", "Sampler()"),
                                               t(m.Sampler, "_allocate", "Sampler._allocate (shared memory)"),
                                               t(m.Sampler, "launch", "Sampler.launch"),
                                               t(m.Sampler, "stop", "Sampler.stop")),
        "sf_hydra.learner.ppo_learner": lambda m: t(m.PPOLearner, "__init__", "PPOLearner()"),
        "sf_hydra.learner.checkpointing": lambda m: t(m.PeriodicCheckpoint, "save", "checkpoint save"),
        "lightning.pytorch.trainer.trainer": lambda m: (t(m.Trainer, "__init__", "Trainer()"),
                                                        t(m.Trainer, "fit", "Trainer.fit")),
    }
    sys.meta_path.insert(0, ImportWatch(tracer, hooks))
    import hydra  # noqa: F401 (its import is timed here, before the entry point imports it)
    from hydra._internal.hydra import Hydra

    import sf_hydra.app.cli as cli
    from sf_hydra.sampler import mp

    tracer.mark("cli imported")
    t(cli, "check_command_line")
    t(Hydra, "compose_config", "Hydra compose")  # every compose: the checks' (compose API) and hydra.main's
    t(mp, "warm_up", "fork server start (mp.warm_up)")
    if hasattr(mp, "start_shm_manager"):
        t(mp, "start_shm_manager", "torch_shm_manager start")
    if hasattr(mp, "stop_fork_server"):
        t(mp, "stop_fork_server", "fork server stop")
    t(Hydra, "get_mode", "Hydra.get_mode")
    t(Hydra, "run", "Hydra.run (the job)")
    if hasattr(cli, "run_job"):  # a single run's job on the checks' compose (since the command line is composed once)
        t(cli, "run_job", "run_job (the job)")
    train_task = cli.train_task

    def traced_train_task(*args, **kwargs):
        task = train_task(*args, **kwargs)

        def traced_task(cfg):
            tracer.mark("task function starts")
            return task(cfg)

        return functools.wraps(task)(traced_task)

    cli.train_task = traced_train_task
    exit_now = os._exit

    def traced_exit(code):
        tracer.mark("os._exit")
        tracer.save()
        exit_now(code)

    os._exit = traced_exit
    sys.argv = [str(Path(os.getcwd()) / "train.py"), *argv]
    try:
        cli.train_main()
    finally:
        tracer.mark("interpreter exit")
        tracer.save()


# ----------------------------------------------------------------------------- the benchmark (parent)
def main(argv=None) -> None:
    import argparse
    import tempfile

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--repo", type=Path, default=REPO, help="the checkout to trace (train.py and src/)")
    p.add_argument("overrides", nargs="*", help="after `--`: Hydra overrides (default: CartPole, 2048 steps)")
    args = p.parse_args(argv)
    overrides = args.overrides or ["env=gym/cartpole", "train_for_env_steps=2048"]
    runs = []
    with tempfile.TemporaryDirectory(prefix="startup_trace_") as tmp:
        for i in range(args.repeats):
            out = Path(tmp) / f"trace_{i}.json"
            cmd = [sys.executable, str(HERE), "--child", str(out), f"train_dir={tmp}/train", f"experiment=run{i}",
                   "seed=0", "train_until_avg_return=null", *overrides]
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(args.repo / "src"), str(args.repo)]))
            start = time.time()
            proc = subprocess.run(cmd, cwd=args.repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
            wall = time.time() - start
            if proc.returncode != 0 or not out.exists():
                print(proc.stderr[-3000:])
                raise SystemExit(f"run {i} failed (exit code {proc.returncode})")
            events = json.loads(out.read_text())
            runs.append(events)
            print(f"run {i}: launch to exit {wall:.2f} s (this script's clock), learner CPU {events[-1][2]:.2f} s",
                  flush=True)
    order = [name for name, _, _ in runs[0]]
    print(f"\nmedians over {len(runs)} runs (seconds since the process started; CPU: the learner process's)")
    print(f"{'event':48s} {'wall s':>7s} {'CPU s':>7s}")
    for k, name in enumerate(order):
        walls = [r[k][1] for r in runs if len(r) > k and r[k][0] == name]
        cpus = [r[k][2] for r in runs if len(r) > k and r[k][0] == name]
        if walls:
            print(f"{name:48s} {statistics.median(walls):7.2f} {statistics.median(cpus):7.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        traced_run(sys.argv[2], sys.argv[3:])
    else:
        main()
