"""Population-based training (PBT, arXiv 1711.09846, as Sample Factory runs it).

At the start of a fresh run, members 1..N-1 are perturbed once as below (the values named in
`pbt.initial_hyperparams` are kept as given); member 0 is the reference, never perturbed.
Every `pbt.period_env_steps` of a policy's own env steps (after `pbt.start_mutation`), that
policy is looked at against the population, ranked by `pbt.target_objective` (true_objective:
the return without the policy's own reward-shaping bonus), among the members that have an objective (a
member without one, before its first episode or after a replacement emptied its windows, is left out; a look
at a policy without one, or with no other member to compare with, is skipped: each is an event):
  - in the best `ceil(replace_fraction * N)`: left alone;
  - in the worst `ceil(replace_fraction * N)`: a policy drawn from the best is its donor when
    it leads by more than both gaps (`replace_reward_gap` relative to the donor's objective,
    `replace_reward_gap_absolute`); the policy then takes the donor's weights, normalizers,
    optimizer state and hyperparameters, under a new version, published to the workers at once
    (a version names one set of weights; the trajectories of the old ones, waiting or in flight, are
    dropped however small their lag: door.publish_replacement);
  - then (replaced or not, the reference excepted) each of its hyperparameters is perturbed with
    probability `mutation_rate` (pbt_rules.mutated: back to its default with 1% chance, else
    multiplied or divided, even odds, by a factor drawn from [perturb_min, perturb_max]; a value
    that lives just below 1 (Adam's betas, gamma) has its distance to 1 perturbed by a factor in
    [1.01, 1.2] instead, so it stays below 1). The hyperparameters are the learner's
    (config/choices.py PBT_HYPERPARAMS; gamma with pbt.optimize_gamma, Adam's with pbt.optimize_adam) and, where
    the env family declares reward shaping, its shaping weights (`reward_shaping.<name>.up|down`),
    which the rollout workers apply per policy.

The population is the run's own `algo.num_policies` policies, or, with `pbt.workspace`, one
member per run: runs exchange objectives and checkpoints through that folder (pbt_workspace.py).
Every decision is appended to `<run_dir>/pbt/events.jsonl`; each policy's hyperparameters
after it to `<run_dir>/pbt/hyperparams_<k>.jsonl`.
"""

from __future__ import annotations

import ast
import logging
import random
import time
from pathlib import Path
from typing import Callable, Dict, Optional

import lightning as L

from sf_hydra.core.door import door_of
from sf_hydra.core.metric_names import is_eval_metric
from sf_hydra.learner.learner_settings import initial_hyperparams, shaping_difference, shaping_hyperparams
from sf_hydra.learner.pbt_rules import (
    Decision,
    append_jsonl,
    decide,
    mutable_names,
    mutated,
    perturbs,
    unranked,
    weights_digest,
)
from sf_hydra.learner.pbt_workspace import Workspace

log = logging.getLogger("sf_hydra")


class PopulationBasedTraining(L.Callback):
    """Applies `decide` to the policy the learner just trained whenever its env steps pass its
    next period boundary; replacements and new hyperparameters reach the learner (and, for
    weights, the rollout workers) at once. The next boundary of each policy and the random
    state are saved in checkpoints, so a resumed run goes on where it was."""

    def __init__(self, pbt, run_dir: Path, seed: Optional[int]):
        self.pbt = pbt
        self.dir = Path(run_dir) / "pbt"
        self.rng = random.Random(seed)
        # (policy, eval/ metric) -> the latest evaluation's value: set by the evaluation callback
        self.eval_objective: Optional[Callable[[int, str], Optional[float]]] = None
        self.next_look: Dict[int, int] = {}
        self.workspace = None
        if pbt.workspace:
            self.workspace = Workspace(Path(pbt.workspace), pbt.member)

    # -- the hooks ----------------------------------------------------------------------------
    def on_train_start(self, trainer, pl_module):
        for k in range(pl_module.num_policies):
            fresh = not (self.dir / f"hyperparams_{self._member(k)}.jsonl").exists()
            if fresh and perturbs(self._member(k)):  # a resumed run keeps its checkpoint's values
                self._perturb(pl_module, k, dict(pl_module.hyperparams[k]), keep=self._given(k))
            self._send_shaping(trainer, pl_module, k)  # a resumed run's own weights
            self.next_look.setdefault(k, self._boundary_after(pl_module.stats[k].env_steps))
            if fresh:
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
            self.rng.setstate(ast.literal_eval(state_dict["rng"]))

    # -- the rule -----------------------------------------------------------------------------
    def _send_shaping(self, trainer, m, k: int) -> None:
        """Policy k's reward-shaping weights reach the rollout workers (the rows it acts in)."""
        if m.optimization.reward_shaping:
            door_of(trainer).set_reward_shaping(k, shaping_difference(m.hyperparams[k], m.optimization.reward_shaping))

    def _boundary_after(self, steps: int) -> int:
        period = self.pbt.period_env_steps
        return (steps // period + 1) * period

    def _member(self, k: int) -> int:
        return self.pbt.member if self.workspace is not None else k

    def _given(self, k: int):
        """The names pbt.initial_hyperparams sets for policy k's member (kept at the start)."""
        given = {int(j): h for j, h in (self.pbt.initial_hyperparams or {}).items()}
        return tuple(given.get(self._member(k)) or ())

    def _perturb(self, m, k: int, base, keep=()) -> None:
        """Policy k's hyperparameters become `base` perturbed (pbt_rules.mutated; the defaults are the
        algo.* values and the env's declared shaping weights), the names in `keep` left as they are."""
        defaults = {**initial_hyperparams(m.algo), **shaping_hyperparams(m.optimization.reward_shaping)}
        values = mutated(base, mutable_names(self.pbt, base, keep), self.rng, self.pbt.mutation_rate,
                         self.pbt.perturb_min, self.pbt.perturb_max, defaults)
        m.optimization.set_hyperparams(k, values)

    def _objective(self, m, k: int) -> Optional[float]:
        """Policy k's `pbt.target_objective`: from its episode window, or for an eval/ metric from the
        evaluation during training (`eval_objective`, set by sf_hydra.evaluation's callback; None before
        its first evaluation of the policy)."""
        if is_eval_metric(self.pbt.target_objective):
            return None if self.eval_objective is None else self.eval_objective(k, self.pbt.target_objective)
        return m.statistics.objective(k, self.pbt.target_objective)

    def _look_at(self, trainer, m, k: int, steps: int) -> None:
        if self.workspace is not None:  # the members that published, this one's own objective now
            objectives = self.workspace.objectives()
            me = self.pbt.member
            objectives[me] = self._objective(m, k)
        else:
            objectives = {j: self._objective(m, j) for j in range(m.num_policies)}
            me = k
        decision = decide(me, objectives, self.pbt, self.rng)
        if decision is None:  # no objective of its own, or none to compare with
            self._record_skip(m, k, steps, objectives)
            return
        before = dict(m.hyperparams[k])
        if decision.in_best:
            self._record_event(m, k, steps, decision, before)
            return
        donor_digest = None
        if decision.donor is not None:
            version = m.policy_versions[k]
            if self.workspace is not None:
                donor_digest = self.workspace.copy_into(m, trainer, decision.donor, k)
                if donor_digest is None:
                    decision = decision._replace(donor=None)  # its file is unreadable: a mutation only
            else:
                donor_digest = weights_digest(m.policies[decision.donor].state_dict())
                m.optimization.copy_policy(decision.donor, k)
            if m.policy_versions[k] != version:  # new weights, a new version: the workers act with them at once,
                # and what the old ones acted is dropped (it lags by a version only)
                door_of(trainer).publish_replacement(k, m.policies[k], m.policy_versions[k])
        base = dict(m.hyperparams[k])  # its own, or the donor's it just took
        if perturbs(me):
            self._perturb(m, k, base)
        elif decision.donor is None:  # the reference, not replaced: nothing changes
            self._record_event(m, k, steps, decision, before)
            return
        self._send_shaping(trainer, m, k)
        self._record_event(m, k, steps, decision, before, donor_digest, base)
        self._record_hyperparams(m, k, "replaced" if decision.donor is not None else "mutated")

    def _record_skip(self, m, k: int, steps: int, objectives) -> None:
        """A look that decided nothing, appended to events.jsonl and logged: the period boundary has passed,
        so without this record the look would be lost unseen. `left_out`: the members without an objective."""
        own = objectives.get(self._member(k)) is None
        event = self._event(m, k, steps, "skipped (no objective)" if own else "skipped (no other objective)",
                            objectives)
        event.update(left_out=list(unranked(objectives)), hyperparams_before=dict(m.hyperparams[k]))
        append_jsonl(self.dir / "events.jsonl", event)
        log.info("PBT: look at policy %d at %d env steps skipped: %s (without an objective: %s)", event["policy"],
                 steps, "it has no objective" if own else "no other member has one", event["left_out"])

    def _event(self, m, k: int, steps: int, action: str, objectives) -> dict:
        """The fields every line of events.jsonl has."""
        member = self._member(k)
        return {"time": time.time(), "env_steps": int(steps), "policy": member, "run_env_steps": int(m.env_steps),
                "action": action, "objective": objectives.get(member),
                "objectives": {str(j): o for j, o in sorted(objectives.items())},
                "target_objective": self.pbt.target_objective}

    def _record_event(self, m, k: int, steps: int, decision: Decision, before, donor_digest=None,
                      base=None) -> None:
        """One look, appended to events.jsonl: `hyperparams_before` (those in effect at the look) always;
        with `base` (a change), what was perturbed and the result."""
        member = self._member(k)
        if decision.in_best:
            action = "kept (best)"
        elif decision.donor is not None:
            action = "replaced"
        else:
            action = "mutated" if base is not None else "kept (reference)"
        event = self._event(m, k, steps, action, decision.objectives)
        event["donor"] = decision.donor
        event["donor_objective"] = None if decision.donor is None else decision.objectives.get(decision.donor)
        if decision.left_out:  # ranked without them: no objective yet
            event["left_out"] = list(decision.left_out)
            log.info("PBT: policy %d ranked without policies %s (no objective yet)", member, event["left_out"])
        if donor_digest is not None:  # the weights it took, and its own right after: equal
            event["donor_weights_digest"] = donor_digest
            event["weights_digest"] = weights_digest(m.policies[k].state_dict())
        event["hyperparams_before"] = before
        if base is not None:  # what was perturbed (the donor's after a replacement), after
            event["hyperparams_perturbed_from"] = base
            event["hyperparams_after"] = dict(m.hyperparams[k])
        append_jsonl(self.dir / "events.jsonl", event)
        if decision.donor is not None:
            log.info("PBT: policy %d (objective %.4g) replaced by policy %d (objective %.4g) at %d env steps",
                     member, event["objective"], decision.donor, event["donor_objective"], steps)

    def _record_hyperparams(self, m, k: int, why: str) -> None:
        append_jsonl(self.dir / f"hyperparams_{self._member(k)}.jsonl",
                     {"time": time.time(), "env_steps": int(m.stats[k].env_steps), "why": why,
                      **m.hyperparams[k]})
