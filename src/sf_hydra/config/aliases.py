"""Command-line spellings that Hydra cannot take as they are.

`experiment` is two things, as in Sample Factory and in lightning-hydra-template: the run's
name (`experiment=my_run`, a plain key) and a preset (`+experiment=doom_battle`). Hydra
treats a key that is also a config group as the group, so the presets live in the group
`experiments` (the folder's name) and `+experiment=` is spelled `+experiments=` for Hydra.
"""

from __future__ import annotations

from typing import List, Sequence

ALIASES = {"+experiment=": "+experiments="}


def apply_aliases(argv: Sequence[str]) -> List[str]:
    out = []
    for arg in argv:
        for alias, real in ALIASES.items():
            if arg.startswith(alias):
                arg = real + arg[len(alias):]
        out.append(arg)
    return out
