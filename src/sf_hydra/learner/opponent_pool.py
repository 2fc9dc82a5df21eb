"""The opponent pool of self-play against past selves (`selfplay.*`, beyond Sample Factory).

Every `snapshot_every_env_steps` of a trained policy's own env steps, a frozen copy of it
(weights and normalizers) joins the pool: it is written to `<run_dir>/selfplay/` and
published to one of the sampler's pool slots, where the rollout workers act with it in
opponent seats (sampler/policy_mapping.py). A full pool replaces its oldest snapshot. A
snapshot never trains and never changes: its slot is written once, when it joins. The pool
survives a resume: `pool.json` lists the snapshots and their files, both written atomically.

The league (learner/league.py) rates every player from the games the workers report, in runs with
a pool or with several trained policies in a multi-agent env (`selfplay.ratings`): the ratings, each
pair's head-to-head record and the pool are written to `<run_dir>/selfplay/ratings.json` (at most
every `write_every_sec`, and at the end), the trained policies' ratings to TensorBoard
(`selfplay/rating/policy_<k>`). With `selfplay.opponent_sampling` other than uniform, the odds of
drawing each snapshot as a policy's opponent follow that policy's results against it (from the moment it
joins: a snapshot not played yet takes the league's value for that).
"""

from __future__ import annotations

import copy
import json
import logging
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import lightning as L
import torch

from sf_hydra.config.schema import SelfPlayConfig, typed_group
from sf_hydra.core.door import door_of
from sf_hydra.core.files import write_atomically
from sf_hydra.core.game_results import snapshot
from sf_hydra.learner.callbacks import send_scalars
from sf_hydra.learner.league import League

log = logging.getLogger("sf_hydra")

INDEX = "pool.json"
RATINGS = "ratings.json"


class OpponentPool(L.Callback):
    def __init__(self, directory: Path, selfplay: Any, write_every_sec: float = 10.0, use_frameskip: bool = True,
                 frameskip: int = 1):
        """selfplay: the selfplay.* group (SelfPlayConfig, its DictConfig or a mapping of some of its keys);
        use_frameskip, frameskip: the scalars' x-axis, as the run's other scalars (callbacks.Summaries)."""
        sp = typed_group(SelfPlayConfig, selfplay)
        pool_size = sp.pool_size
        self.directory, self.pool_size, self.every = Path(directory), pool_size, sp.snapshot_every_env_steps
        self.slots: List[Optional[Dict]] = [None] * pool_size  # what each pool slot holds
        self.generation = 0  # snapshots taken so far in the run (a slot's store version)
        self.next_at: Dict[int, int] = {}  # policy -> its env steps at which it is snapshotted next
        self.rate, self.sampling, self.exponent = sp.ratings, str(sp.opponent_sampling), sp.pfsp_exponent
        self.write_every = write_every_sec
        self.frames_per_step = 1 if use_frameskip else max(1, int(frameskip))
        self.league: Optional[League] = None  # built at train start (it needs the number of policies)
        self._written, self._unwritten = time.monotonic(), False

    # -- persistence ---------------------------------------------------------------------------
    def _save_index(self) -> None:
        index = {"generation": self.generation, "slots": self.slots}
        write_atomically(self.directory / INDEX, lambda p: p.write_text(json.dumps(index, indent=2)))

    def _save_ratings(self) -> None:
        pool = {snapshot(e["generation"]): {"policy": e["policy"], "env_steps": e["env_steps"], "slot": slot}
                for slot, e in enumerate(self.slots) if e is not None}
        if self.sampling != "uniform":  # each trained policy's odds of drawing the snapshot
            for name, e in zip(pool, (e for e in self.slots if e is not None)):
                pool[name]["odds"] = self.league.odds(e["generation"], self.sampling, self.exponent)
        content = {**self.league.table(pool), "state": self.league.state_dict()}
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomically(self.directory / RATINGS, lambda p: p.write_text(json.dumps(content, indent=1)))
        self._written, self._unwritten = time.monotonic(), False

    def _restore(self, pl_module, door) -> None:
        ratings = self.directory / RATINGS
        if self.league is not None and ratings.exists():
            self.league.load_state_dict(json.loads(ratings.read_text())["state"])
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
            door.publish_opponent(slot, scratch, entry["generation"], self._odds(entry["generation"]))
            self.slots[slot] = entry
            self.next_at[entry["policy"]] = max(self.next_at.get(entry["policy"], 0), entry["env_steps"] + self.every)
        log.info("opponent pool: %d snapshots restored from %s", sum(e is not None for e in self.slots), path)

    # -- callbacks -----------------------------------------------------------------------------
    def on_train_start(self, trainer, pl_module):
        if self.pool_size > 0:
            self.directory.mkdir(parents=True, exist_ok=True)
        self.league = League(len(pl_module.stats)) if self.rate or self.sampling != "uniform" else None
        self._restore(pl_module, door_of(trainer))
        for k, stats in enumerate(pl_module.stats):
            self.next_at.setdefault(k, stats.env_steps + self.every)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.pool_size > 0:
            k = pl_module.last_policy
            steps = pl_module.stats[k].env_steps
            if steps >= self.next_at[k]:
                self.snapshot(trainer, pl_module, k)
                self.next_at[k] = steps + self.every
        if self.league is not None and pl_module.statistics.games:
            self._rate(trainer, pl_module)

    def on_train_end(self, trainer, pl_module):
        if self.league is not None and (self._unwritten or self.league.rated):
            self._save_ratings()
            self._send_scalars(trainer, pl_module)

    def _rate(self, trainer, pl_module) -> None:
        """Rates the games reported since the last batch; sets the opponent odds; writes now and then."""
        while pl_module.statistics.games:
            self.league.add(pl_module.statistics.games.popleft())
        self._unwritten = True
        if self.sampling != "uniform":
            door = door_of(trainer)
            for slot, entry in enumerate(self.slots):
                if entry is not None:
                    door.set_opponent_odds(slot, self._odds(entry["generation"]))
        if time.monotonic() - self._written >= self.write_every:
            self._save_ratings()
            self._send_scalars(trainer, pl_module)

    def _odds(self, generation: int) -> Optional[List[float]]:
        """Per trained policy, the odds of drawing snapshot `generation` by `selfplay.opponent_sampling`: the
        league's, for a snapshot that just joined as for any other (None under uniform: even odds). A snapshot
        no policy has played yet takes the league's value for that (p = 1/2), like every unplayed one."""
        if self.sampling == "uniform":
            return None
        return self.league.odds(generation, self.sampling, self.exponent)

    def _send_scalars(self, trainer, pl_module) -> None:
        if trainer.logger is not None:
            send_scalars(trainer.loggers, self.league.scalars(), pl_module.env_steps // self.frames_per_step)

    def snapshot(self, trainer, pl_module, policy: int) -> int:
        """Freezes `policy` into a free slot, else the oldest; returns the slot."""
        empty = [i for i, e in enumerate(self.slots) if e is None]
        slot = empty[0] if empty else min(range(self.pool_size), key=lambda i: self.slots[i]["generation"])
        self.generation += 1
        model, stats = pl_module.policies[policy], pl_module.stats[policy]
        name = f"{snapshot(self.generation)}.pt"
        write_atomically(self.directory / name, lambda p: torch.save(model.state_dict(), p))
        replaced = self.slots[slot]
        self.slots[slot] = {"policy": policy, "policy_version": stats.version, "env_steps": stats.env_steps,
                            "generation": self.generation, "file": name}
        self._save_index()
        if replaced is not None:
            (self.directory / replaced["file"]).unlink(missing_ok=True)
        if self.league is not None:
            if replaced is not None:
                self.league.leave(replaced["generation"])
            self.league.join(self.generation, policy)
        door_of(trainer).publish_opponent(slot, model, self.generation, self._odds(self.generation))
        log.info("opponent pool: policy %d (version %d, %d env steps) joined as snapshot %d in slot %d", policy,
                 stats.version, stats.env_steps, self.generation, slot)
        return slot
