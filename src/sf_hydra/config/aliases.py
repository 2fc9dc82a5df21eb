"""Command-line spellings that Hydra cannot take as they are.

`experiment` is two things, as in Sample Factory and in lightning-hydra-template: the run's
name (`experiment=my_run`, a plain key) and a preset (`+experiment=doom_battle`). Hydra
treats a key that is also a config group as the group, so the presets live in the group
`experiments` (the folder's name) and `+experiment=` is spelled `+experiments=` for Hydra.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional, Sequence

ALIASES = {"+experiment=": "+experiments="}
# `hardware.num_workers=auto`: as many rollout workers as this machine gives the run cores, counted where
# the run resolves its config (a Slurm or local_parallel job: on its own node, within its own pinning).
# With several learner ranks on the node (hardware.devices), each rank's share of them.
AUTO = {"hardware.num_workers=auto": "hardware.num_workers='${sf_cores:${hardware.devices}}'"}


def cores(ranks: int = 1) -> int:
    """The cores this process may run on (its CPU affinity: a Slurm allocation, a taskset, a container), shared
    by `ranks` learner ranks started on this machine from this process (at least 1 each). A task of a Slurm job
    step of several tasks is one rank with its own allocation already: its cores are all its own."""
    total = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    one_task_per_rank = int(os.environ.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in os.environ
    return total if one_task_per_rank else max(1, total // max(1, int(ranks)))


# Step and frame budgets as people write them: `1M`, `2.5M`, `1B`, `10k`, `1e6` (saved as the integer).
BUDGET_KEYS = ("train_for_env_steps", "save_best_after", "pbt.period_env_steps", "selfplay.snapshot_every_env_steps",
               "eval.every_env_steps")
BUDGET_FORMS = "an integer: 1000000, or 1M, 2.5M, 1B, 10k, 1e6 (k = 10^3, M = 10^6, B = 10^9)"
_BUDGET = re.compile(r"^(\d+(?:\.\d*)?)\s*([kKmMbB]?)$|^(\d+(?:\.\d*)?[eE]\+?\d+)$")
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9}


def budget(text: str) -> Optional[int]:
    """The integer a budget written as `1M`, `2.5M`, `1B`, `10k`, `1e6` or `1000000` means; None for anything else
    (a fraction of a step, a negative number, another word)."""
    found = _BUDGET.match(str(text).strip())
    if found is None:
        return None
    number, suffix, scientific = found.groups()
    value = float(scientific) if scientific else float(number) * _SCALE[suffix.lower()]
    return int(value) if value.is_integer() and value < 2**63 else None


def _with_budget(arg: str) -> str:
    """`key=2.5M` as `key=2500000` for a budget key (each value of a sweep's `a,b` too); other arguments as they
    are (a value no form fits is left for the schema to refuse, naming BUDGET_FORMS)."""
    key, eq, value = arg.partition("=")
    if not eq or key.lstrip("+") not in BUDGET_KEYS:
        return arg
    parts = value.split(",")
    numbers = [budget(p) for p in parts]
    return f"{key}={','.join(str(n) if n is not None else p for n, p in zip(numbers, parts))}"


def apply_aliases(argv: Sequence[str]) -> List[str]:
    out = []
    for arg in argv:
        for alias, real in ALIASES.items():
            if arg.startswith(alias):
                arg = real + arg[len(alias):]
        out.append(_with_budget(AUTO.get(arg.lstrip("+"), arg)))
    return out


def more_workers_than_cores(num_workers: int, num_envs_per_worker: int, devices: int = 1) -> Optional[str]:
    """One line for a run whose rollout workers outnumber the cores it may use (`cores`): a command line sized
    for a bigger machine (Sample Factory's `--num_workers=16 --num_envs_per_worker=10`) starts slowly and
    leaves the learner little time on such a box, without failing; the line says what
    `hardware.num_workers=auto` would pick here. None when every worker has a core."""
    available = cores(devices)
    if num_workers <= available:
        return None
    return (f"hardware.num_workers={num_workers} rollout workers ({num_envs_per_worker} envs each) share "
            f"{available} core{'s' if available > 1 else ''}: the start is slow and the learner gets little time; "
            f"hardware.num_workers=auto would pick {available} here")
