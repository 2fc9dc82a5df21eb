"""PBT across runs (`pbt.workspace`): each run trains one member of the population (its one
policy, `pbt.member`), and members meet in a shared folder, e.g. on a cluster's shared disk:

    <workspace>/member_<m>/policy.pt    its weights, normalizers, optimizer state, hyperparameters
    <workspace>/member_<m>/state.json   {"member", "env_steps", "objective", "time"}

A member writes both at each of its period boundaries (policy.pt first, each to a temporary
name renamed into place, so a reader sees a whole file or the previous one), reads the
others' state.json files to rank the population, and loads a donor's policy.pt when the PBT
rule (learner/pbt.py) replaces it. A member that died keeps its last files: it still counts
and may still be a donor; an unreadable or half-written file is skipped, never fatal.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Dict, Optional

import torch

from sf_hydra.core.files import write_atomically
from sf_hydra.learner.pbt_rules import weights_digest

log = logging.getLogger("sf_hydra")


class Workspace:
    def __init__(self, folder: Path, member: int):
        self.folder, self.member = Path(folder).absolute(), int(member)
        self.own = self.folder / f"member_{self.member}"
        self.own.mkdir(parents=True, exist_ok=True)

    def publish(self, m, trainer, objective, env_steps: int) -> None:
        """This member's policy and objective, for the others."""
        state = {"weights": m.policies[0].state_dict(), "optimizer": m.optimization.optimizers[0].state_dict(),
                 "hyperparams": dict(m.hyperparams[0]), "env_steps": int(env_steps)}
        write_atomically(self.own / "policy.pt", lambda p: torch.save(state, p))
        record = {"member": self.member, "env_steps": int(env_steps), "objective": objective, "time": time.time()}
        write_atomically(self.own / "state.json", lambda p: p.write_text(json.dumps(record)))

    def objectives(self) -> Dict[int, Optional[float]]:
        """The other members' last published objectives: None for a member that published before
        its first episode (left out of the ranking until it has one); a member
        that never published is not known yet."""
        found = {}
        for state in sorted(self.folder.glob("member_*/state.json")):
            try:
                record = json.loads(state.read_text())
                member, objective = int(record["member"]), record["objective"]
                objective = None if objective is None else float(objective)
            except (OSError, ValueError, KeyError, TypeError):
                continue  # being replaced right now, or not ours: skip it this time
            if member != self.member:
                found[member] = objective
        return found

    def copy_into(self, m, trainer, donor: int, policy: int) -> Optional[str]:
        """Loads member `donor`'s published policy into the learner's `policy` (under a new version:
        PolicyOptimizers.load_policy_state), returning the digest of the weights it took; None (and a
        warning) when its file cannot be read."""
        path = self.folder / f"member_{donor}" / "policy.pt"
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            m.optimization.load_policy_state(policy, state["weights"], state["optimizer"], state["hyperparams"])
        except Exception as e:  # a member's file is never worth the run
            log.warning("PBT: could not take member %d's policy from %s (%s: %s); mutating only", donor, path,
                        type(e).__name__, e)
            return None
        return weights_digest(state["weights"])
