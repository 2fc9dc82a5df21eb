"""Start-up: seconds from launching `train.py` to the first rollout, the learner's first trajectory and first update.

    python benchmarks/startup.py --repeats 5
    python benchmarks/startup.py --repeats 3 --configs doom_basic -- hardware.use_env_info_cache=false
    python benchmarks/startup.py --repeats 3 --baseline HEAD~1
    python benchmarks/startup.py --repeats 5 --configs cartpole_tiny --baseline DIR   # DIR: `git archive REV
        train.py src conf experiments | tar -x -C DIR`, an older revision's files (no git worktree made)

Each run is a fresh `python train.py` process with a small budget; the run writes its start-up
milestones, counted from its process's start (interpreter start-up and imports included), to
summary.json (`profile.startup`; learner/profile.py): `first_rollout_s` (a worker reported its first
trajectory), `first_trajectory_s` (the learner took it from the queue), `first_update_s`. Printed
per run and as medians per config: those three, the whole command's wall seconds (launch to exit,
teardown included; `cartpole_tiny`, 2048 steps, is little else) and its part after the first update
(`cartpole_tiny`: the run's end, its teardown), and CPU seconds (user + system):
the learner process's (train.py's own: on a quiet machine its start-up is CPU-bound, so this is the
figure a loaded machine does not inflate much) and the whole tree's. Configs alternate (cartpole,
cartpole_tiny, doom_basic, cartpole, ...) so a busy machine slows
them alike; "other CPU" says how busy it was. `--baseline REV` runs each config also as of git
revision REV (a temporary worktree, same venv), alternating with the checkout: a change's before
and after. `--hide-modules scipy,matplotlib` runs as if those packages were not installed (import,
`importlib.util.find_spec` and `importlib.metadata`'s version/distribution fail for them, through a
`sitecustomize` on PYTHONPATH): what an install
without them would cost, e.g. the base install without the `optuna` extra (which alone brings scipy,
which torchmetrics imports whenever it is installed); those runs alternate with the plain ones (and
the baseline's, if asked). The bar of the throughput issue: first trajectory
within 3 s on the 2-core reference machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    REPO,
    exit_cleanly_on_signals,
    fmt,
    median,
    print_table,
    python_env,
    read_summary,
    revision_checkout,
    run_tree,
    train_py_command,
    wait_for_quiet,
)

CONFIGS: Dict[str, List[str]] = {
    "cartpole": ["env=gym/cartpole", "train_for_env_steps=20000"],
    # a tiny run: one update's worth of steps, so its wall (launch to exit) is start-up and teardown
    "cartpole_tiny": ["env=gym/cartpole", "train_for_env_steps=2048"],
    "doom_basic": ["env=doom/basic", "train_for_env_steps=8000"],
}


HIDER = """\
import os, sys
HIDDEN = tuple(n for n in os.environ.get("SF_STARTUP_HIDE_MODULES", "").split(",") if n)
class _Hidden:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by benchmarks/startup.py)", name=name)
        return None
sys.meta_path.insert(0, _Hidden)
import importlib.metadata as _md
def _hiding(lookup):
    def wrapped(name, *args, **kwargs):
        if name.split(".")[0] in HIDDEN:
            raise _md.PackageNotFoundError(name)
        return lookup(name, *args, **kwargs)
    return wrapped
_md.version, _md.distribution = _hiding(_md.version), _hiding(_md.distribution)
"""


def hiding_env(env: dict, hidden: str, folder: Path) -> dict:
    """`env` with a `sitecustomize` first on PYTHONPATH that makes `hidden`'s packages (comma-separated top-level
    names) unimportable and unfound (importlib.util.find_spec raises; importlib.metadata knows no such
    distribution), in every process of the run: how libraries that probe for an optional package see an install
    without it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(HIDER)
    env = dict(env, SF_STARTUP_HIDE_MODULES=hidden)
    env["PYTHONPATH"] = os.pathsep.join([str(folder), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def run_once(name: str, i: int, work: Path, extra: List[str], timeout: float, repo: Path = REPO,
             system: str = "", hidden: str = "") -> dict:
    """One run of config `name` from the checkout `repo` (`system`: "" for this checkout, "base", or "hidden":
    this checkout with the `hidden` packages made unimportable)."""
    experiment = f"{name}{'_' + system if system else ''}_{i}"
    run_dir = work / experiment
    overrides = [*CONFIGS[name], f"train_dir={work / 'train'}", f"experiment={experiment}", "seed=0",
                 "train_until_avg_return=null", *extra]
    env = python_env(repo=repo)
    if hidden:
        env = hiding_env(env, hidden, work / "hide")
    # polled often: the learner's CPU is read at the last poll before its exit
    proc = run_tree(train_py_command(sys.executable, overrides, repo), run_dir / "stdout.log", cwd=work,
                    env=env, timeout=timeout, poll=0.1)
    startup = read_summary(work / "train" / experiment).get("profile", {}).get("startup", {})
    label = f" @{system}" if system and not hidden else (f" without {hidden}" if hidden else "")
    return {"config": name + label, "ok": proc.returncode == 0,
            "wall": proc.wall_seconds, "other": proc.other_cpu, "log": run_dir / "stdout.log",
            "first_rollout": startup.get("first_rollout_s"), "first_trajectory": startup.get("first_trajectory_s"),
            "first_update": startup.get("first_update_s"), "learner_cpu": proc.root_cpu_seconds,
            "tree_cpu": proc.cpu_seconds}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=sorted(CONFIGS))
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS")
    p.add_argument("--baseline", metavar="REV", default=None,
                   help="also run each config as of this git revision (before/after a change), alternating")
    p.add_argument("--hide-modules", metavar="NAMES", default="",
                   help="comma-separated packages to run without (as if not installed), alternating with plain runs")
    p.add_argument("overrides", nargs="*", help="after `--`: extra Hydra overrides")
    args = p.parse_args(argv)
    exit_cleanly_on_signals()
    results = []
    with tempfile.TemporaryDirectory(prefix="startup_") as tmp, revision_checkout(args.baseline, Path(tmp)) as base:
        systems = [("", REPO, "")] + ([("base", base, "")] if base is not None else [])
        if args.hide_modules:
            systems.append(("hidden", REPO, args.hide_modules))
        for i in range(args.repeats):
            for name in args.configs:
                for system, repo, hidden in systems:
                    wait_for_quiet(args.wait_quiet)
                    r = run_once(name, i, Path(tmp), args.overrides, args.timeout, repo, system, hidden)
                    results.append(r)
                    print(f"[{r['config']} run {i}] first rollout {fmt(r['first_rollout'], '.2f')} s, "
                          f"first trajectory {fmt(r['first_trajectory'], '.2f')} s, first update "
                          f"{fmt(r['first_update'], '.2f')} s, wall {r['wall']:.1f} s, "
                          f"learner CPU {r['learner_cpu']:.2f} s, tree CPU {r['tree_cpu']:.2f} s, "
                          f"other CPU {r['other']:.2f} cores{'' if r['ok'] else '  FAILED'}", flush=True)
                    if not r["ok"]:
                        print(r["log"].read_text(errors="replace")[-2000:])
    rows = []
    for name in dict.fromkeys(r["config"] for r in results):
        mine = [r for r in results if r["config"] == name]
        rows.append([name, f"{sum(r['ok'] for r in mine)}/{len(mine)}",
                     fmt(median(r["first_rollout"] for r in mine), ".2f"),
                     fmt(median(r["first_trajectory"] for r in mine), ".2f"),
                     fmt(median(r["first_update"] for r in mine), ".2f"),
                     fmt(median(r["wall"] for r in mine), ".1f"),
                     fmt(median(r["wall"] - r["first_update"] for r in mine if r["first_update"] is not None), ".2f"),
                     fmt(median(r["learner_cpu"] for r in mine), ".2f"),
                     fmt(median(r["tree_cpu"] for r in mine), ".2f"), fmt(median(r["other"] for r in mine), ".2f")])
    print()
    print_table(["median", "runs ok", "first rollout s", "first trajectory s", "first update s", "wall s",
                 "wall - first update s", "learner CPU s", "tree CPU s", "other CPU"], rows)


if __name__ == "__main__":
    main()
