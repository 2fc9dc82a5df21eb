"""The opponent pool of self-play against past selves (`selfplay.*`, beyond Sample Factory).

Every `snapshot_every_env_steps` of a trained policy's own env steps, a frozen copy of it
(weights and normalizers) joins the pool: it is written to `<run_dir>/selfplay/` and
published to one of the sampler's pool slots, where the rollout workers act with it in
opponent seats (sampler/policy_mapping.py). A full pool replaces its oldest snapshot. A
snapshot never trains and never changes: its slot is written once, when it joins. The pool
survives a resume: `pool.json` lists the snapshots and their files, both written atomically.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Dict, List, Optional

import lightning as L
import torch

from sf_hydra.door import door_of
from sf_hydra.files import write_atomically

log = logging.getLogger("sf_hydra")

INDEX = "pool.json"


class OpponentPool(L.Callback):
    def __init__(self, directory: Path, pool_size: int, every_env_steps: int):
        self.directory, self.pool_size, self.every = Path(directory), pool_size, every_env_steps
        self.slots: List[Optional[Dict]] = [None] * pool_size  # what each pool slot holds
        self.generation = 0  # snapshots taken so far in the run (a slot's store version)
        self.next_at: Dict[int, int] = {}  # policy -> its env steps at which it is snapshotted next

    # -- persistence ---------------------------------------------------------------------------
    def _save_index(self) -> None:
        index = {"generation": self.generation, "slots": self.slots}
        write_atomically(self.directory / INDEX, lambda p: p.write_text(json.dumps(index, indent=2)))

    def _restore(self, pl_module, door) -> None:
        path = self.directory / INDEX
        if not path.exists():
            return
        index = json.loads(path.read_text())
        self.generation = index["generation"]
        scratch = copy.deepcopy(pl_module.policies[0])
        for slot, entry in enumerate(index["slots"][: self.pool_size]):
            if entry is None:
                continue
            scratch.load_state_dict(torch.load(self.directory / entry["file"], map_location="cpu", weights_only=True))
            door.publish_opponent(slot, scratch, entry["generation"])
            self.slots[slot] = entry
            self.next_at[entry["policy"]] = max(self.next_at.get(entry["policy"], 0), entry["env_steps"] + self.every)
        log.info("opponent pool: %d snapshots restored from %s", sum(e is not None for e in self.slots), path)

    # -- callbacks -----------------------------------------------------------------------------
    def on_train_start(self, trainer, pl_module):
        self.directory.mkdir(parents=True, exist_ok=True)
        self._restore(pl_module, door_of(trainer))
        for k, stats in enumerate(pl_module.stats):
            self.next_at.setdefault(k, stats.env_steps + self.every)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        k = pl_module.last_policy
        steps = pl_module.stats[k].env_steps
        if steps >= self.next_at[k]:
            self.snapshot(trainer, pl_module, k)
            self.next_at[k] = steps + self.every

    def snapshot(self, trainer, pl_module, policy: int) -> int:
        """Freezes `policy` into a free slot, else the oldest; returns the slot."""
        empty = [i for i, e in enumerate(self.slots) if e is None]
        slot = empty[0] if empty else min(range(self.pool_size), key=lambda i: self.slots[i]["generation"])
        self.generation += 1
        model, stats = pl_module.policies[policy], pl_module.stats[policy]
        name = f"snapshot_{self.generation:06d}.pt"
        write_atomically(self.directory / name, lambda p: torch.save(model.state_dict(), p))
        replaced = self.slots[slot]
        self.slots[slot] = {"policy": policy, "policy_version": stats.version, "env_steps": stats.env_steps,
                            "generation": self.generation, "file": name}
        self._save_index()
        if replaced is not None:
            (self.directory / replaced["file"]).unlink(missing_ok=True)
        door_of(trainer).publish_opponent(slot, model, self.generation)
        log.info("opponent pool: policy %d (version %d, %d env steps) joined as snapshot %d in slot %d", policy,
                 stats.version, stats.env_steps, self.generation, slot)
        return slot
