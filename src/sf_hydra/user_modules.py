"""The `imports` config key: modules of the user's own that register env families
(`sf_hydra.envs.register_family`) or encoders (`sf_hydra.models.encoders.register_encoder`).

They are imported before validation in the main process and again in every worker process:
workers are spawned, so they start from a fresh interpreter that has seen none of the
parent's imports. The current directory is searched last, as `python -m` would, so a module
next to where the command is typed is found without setting PYTHONPATH.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Iterable, Optional

from sf_hydra.config.errors import ConfigError


def import_user_modules(names: Optional[Iterable[str]]) -> None:
    if not names:
        return
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise ConfigError("imports", name, f"an importable module, dotted as in `import`, on sys.path or under the current directory ({e})") from None
