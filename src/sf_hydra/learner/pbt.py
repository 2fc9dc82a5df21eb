"""Population-based training (PBT, arXiv 1711.09846, as Sample Factory runs it).

Every `pbt.period_env_steps` of a policy's own env steps (after `pbt.start_mutation`), that
policy is looked at against the population, ranked by `pbt.target_objective`:
  - in the best `ceil(replace_fraction * N)`: left alone;
  - in the worst `ceil(replace_fraction * N)`: a policy drawn from the best is its donor when
    it leads by more than both gaps (`replace_reward_gap` relative to the donor's objective,
    `replace_reward_gap_absolute`); the policy then takes the donor's weights, normalizers,
    optimizer state and hyperparameters;
  - then (replaced or not) each of its hyperparameters is perturbed with probability
    `mutation_rate`: multiplied or divided (even odds) by a factor drawn from
    [perturb_min, perturb_max]; a value that lives just below 1 (Adam's betas, gamma) has
    its distance to 1 perturbed instead, so it stays below 1. The hyperparameters are the
    learner's (pbt_rules.HYPERPARAMS) and, where the env family declares reward shaping, its
    shaping weights (`reward_shaping.<name>.up|down`), which the rollout workers apply per policy.

The population is the run's own `algo.num_policies` policies, or, with `pbt.workspace`, one
member per run: runs exchange objectives and checkpoints through that folder (workspace.py).
Every decision is appended to `<run_dir>/pbt/events.jsonl`; each policy's hyperparameters
after it to `<run_dir>/pbt/hyperparams_<k>.jsonl`.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Dict, Optional

import lightning as L

from sf_hydra.door import door_of
from sf_hydra.learner.pbt_rules import (
    Decision,
    append_jsonl,
    decide,
    mutable_names,
    mutated,
    shaping_difference,
    weights_digest,
)


class PopulationBasedTraining(L.Callback):
    """Applies `decide` to the policy the learner just trained whenever its env steps pass its
    next period boundary; replacements and new hyperparameters reach the learner (and, for
    weights, the rollout workers) at once. The next boundary of each policy and the random
    state are saved in checkpoints, so a resumed run goes on where it was."""

    def __init__(self, pbt, run_dir: Path, seed: Optional[int]):
        self.pbt = pbt
        self.dir = Path(run_dir) / "pbt"
        self.rng = random.Random(seed)
        self.next_look: Dict[int, int] = {}
        self.workspace = None
        if pbt.workspace:
            from sf_hydra.learner.pbt_workspace import Workspace

            self.workspace = Workspace(Path(pbt.workspace), pbt.member)

    # -- the hooks ----------------------------------------------------------------------------
    def on_train_start(self, trainer, pl_module):
        for k in range(pl_module.num_policies):
            self._send_shaping(trainer, pl_module, k)  # a resumed run's own weights
            self.next_look.setdefault(k, self._boundary_after(pl_module.stats[k].env_steps))
            if not (self.dir / f"hyperparams_{self._member(k)}.jsonl").exists():
                self._record_hyperparams(pl_module, k, "start")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        k = pl_module.last_policy
        steps = pl_module.stats[k].env_steps
        if steps < self.next_look[k]:
            return
        self.next_look[k] = self._boundary_after(steps)
        if self.workspace is not None:
            self.workspace.publish(pl_module, trainer, self._objective(pl_module, k), steps)
        if steps < self.pbt.start_mutation:
            return
        self._look_at(trainer, pl_module, k, steps)

    def state_dict(self):
        return {"next_look": {str(k): v for k, v in self.next_look.items()}, "rng": repr(self.rng.getstate())}

    def load_state_dict(self, state_dict):
        self.next_look = {int(k): int(v) for k, v in state_dict.get("next_look", {}).items()}
        if "rng" in state_dict:
            import ast

            self.rng.setstate(ast.literal_eval(state_dict["rng"]))

    # -- the rule -----------------------------------------------------------------------------
    def _send_shaping(self, trainer, m, k: int) -> None:
        """Policy k's reward-shaping weights reach the rollout workers (the rows it acts in)."""
        if m.reward_shaping:
            door_of(trainer).set_reward_shaping(k, shaping_difference(m.hyperparams[k], m.reward_shaping))

    def _boundary_after(self, steps: int) -> int:
        period = self.pbt.period_env_steps
        return (steps // period + 1) * period

    def _member(self, k: int) -> int:
        return self.pbt.member if self.workspace is not None else k

    def _objective(self, m, k: int) -> Optional[float]:
        return m.objective(k, self.pbt.target_objective)

    def _look_at(self, trainer, m, k: int, steps: int) -> None:
        if self.workspace is not None:
            objectives = self.workspace.objectives()
            me = self.pbt.member
            own = self._objective(m, k)
            if own is not None:
                objectives[me] = own
        else:
            objectives = {j: o for j in range(m.num_policies) if (o := self._objective(m, j)) is not None}
            me = k
        decision = decide(me, objectives, self.pbt, self.rng)
        if decision is None or decision.in_best:
            if decision is not None:
                self._record_event(m, k, steps, decision, before=None)
            return
        before = dict(m.hyperparams[k])
        donor_digest = None
        if decision.donor is not None:
            if self.workspace is not None:
                donor_digest = self.workspace.copy_into(m, trainer, decision.donor, k)
                if donor_digest is None:
                    decision = decision._replace(donor=None)  # its file is unreadable: a mutation only
            else:
                donor_digest = weights_digest(m.policies[decision.donor].state_dict())
                m.copy_policy(decision.donor, k)
            if decision.donor is not None:
                door_of(trainer).publish(k, m.policies[k], m.policy_versions[k])
        base = dict(m.hyperparams[k])  # its own, or the donor's it just took
        new = mutated(base, mutable_names(self.pbt, base), self.rng, self.pbt.mutation_rate, self.pbt.perturb_min,
                      self.pbt.perturb_max)
        m.set_hyperparams(k, new)
        self._send_shaping(trainer, m, k)
        self._record_event(m, k, steps, decision, before, donor_digest, base)
        self._record_hyperparams(m, k, "replaced" if decision.donor is not None else "mutated")

    def _record_event(self, m, k: int, steps: int, decision: Decision, before, donor_digest=None,
                      base=None) -> None:
        member = self._member(k)
        event = {
            "time": time.time(), "env_steps": int(steps), "policy": member, "run_env_steps": int(m.env_steps),
            "action": "kept (best)" if decision.in_best else ("replaced" if decision.donor is not None else "mutated"),
            "donor": decision.donor, "objective": decision.objectives.get(member),
            "donor_objective": None if decision.donor is None else decision.objectives.get(decision.donor),
            "objectives": {str(j): o for j, o in sorted(decision.objectives.items())},
            "target_objective": self.pbt.target_objective,
        }
        if donor_digest is not None:  # the weights it took, and its own right after: equal
            event["donor_weights_digest"] = donor_digest
            event["weights_digest"] = weights_digest(m.policies[k].state_dict())
        if before is not None:  # before the look, what was perturbed (the donor's after a replacement), after
            event["hyperparams_before"] = before
            event["hyperparams_perturbed_from"] = base
            event["hyperparams_after"] = dict(m.hyperparams[k])
        append_jsonl(self.dir / "events.jsonl", event)
        if decision.donor is not None:
            from sf_hydra.learner.callbacks import log

            log.info("PBT: policy %d (objective %.4g) replaced by policy %d (objective %.4g) at %d env steps",
                     member, event["objective"], decision.donor, event["donor_objective"], steps)

    def _record_hyperparams(self, m, k: int, why: str) -> None:
        append_jsonl(self.dir / f"hyperparams_{self._member(k)}.jsonl",
                     {"time": time.time(), "env_steps": int(m.stats[k].env_steps), "why": why,
                      **m.hyperparams[k]})
