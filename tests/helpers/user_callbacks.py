"""A user's Lightning callback, added to a run from the command line or YAML
(`+callbacks.<name>._target_=tests.helpers.user_callbacks.WriteOnTrainEnd`), and a class that
is not a callback, which such a node must not name."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L


class WriteOnTrainEnd(L.Callback):
    """Writes `path` when training ends: the env steps trained, and `note` (an argument from the config)."""

    def __init__(self, path: str, note: str = ""):
        self.path = Path(path)
        self.note = note

    def on_train_end(self, trainer, pl_module):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"env_steps": int(pl_module.env_steps), "note": self.note}))


class NotACallback:
    """Builds fine from a node, but Lightning could not call it."""

    def __init__(self, size: int = 1):
        self.size = size
