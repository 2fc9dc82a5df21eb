"""Each policy's optimizer and hyperparameters (PolicyOptimizers, an object the PPO learner holds): building
the optimizers (fused Adam where it is the same update), the learning-rate schedules, and the API
population-based training calls (learner/pbt.py): new hyperparameters, another policy's weights and optimizer
state."""

from __future__ import annotations

import copy
from typing import Dict, List, Sequence

import torch

from sf_hydra.learner.learner_settings import LearnerSettings
from sf_hydra.learner.statistics import PolicyStats


class PolicyOptimizers:
    """Each policy's optimizer and hyperparameters, an object the PPO learner holds: it builds the optimizers
    (`build`, the learner's configure_optimizers) and is what PBT changes (learner/pbt.py). It reads the
    settings; it writes the policies' models and each policy's statistics (its version, its episode windows)
    only when a policy takes other weights (`load_policy_state`)."""

    def __init__(self, policies: torch.nn.ModuleList, settings: LearnerSettings, stats: Sequence[PolicyStats]):
        """policies: the learner's models; stats: each policy's statistics (learner/statistics.py)."""
        self.policies, self.settings, self.stats = policies, settings, stats
        # Each policy's own hyperparameters (config/choices.py PBT_HYPERPARAMS): the algo.* values,
        # changed only by population-based training; the optimizers' groups follow them.
        # With PBT, the env's reward-shaping weights are per-policy hyperparameters too.
        self.reward_shaping = dict(settings.reward_shaping)
        self.hyperparams = [dict(h) for h in settings.hyperparams]
        self.optimizers: List[torch.optim.Optimizer] = []  # `build`'s, one per policy
        self.kernel_flags: List[List[Dict[str, object]]] = []  # each optimizer's implementation, as built

    def build(self) -> List[torch.optim.Optimizer]:
        """`algo.optimizer` (a `_partial_` node, default Adam) called with each policy's parameters, then
        set from the policy's hyperparameters: algo.learning_rate and algo.adam_* (or PBT's values for it)
        are the one source of the groups' lr, betas and eps, whatever the node passes its class (a rule
        refuses a node value that differs, config/validation.py)."""
        self.optimizers = [fused_if_default(self.settings.optimizer(m.parameters())) for m in self.policies]
        for opt, hyper in zip(self.optimizers, self.hyperparams):
            apply_to_optimizer(opt, hyper)
        self.kernel_flags = [kernel_flags(opt) for opt in self.optimizers]
        return self.optimizers

    def keep_kernels(self) -> None:
        """Each optimizer's implementation flags back to `build`'s (a resumed checkpoint's optimizer state,
        restored by now, may name other kernels)."""
        for opt, flags in zip(self.optimizers, self.kernel_flags):
            set_kernel_flags(opt, flags)

    def set_hyperparams(self, policy: int, hyper: Dict[str, float]) -> None:
        self.hyperparams[policy] = dict(hyper)
        apply_to_optimizer(self.optimizers[policy], hyper)

    def copy_policy(self, src: int, dst: int) -> None:
        """Policy `dst` becomes a copy of `src`: weights and normalizers, optimizer state and
        hyperparameters; its own counters stay, its version goes up by one (load_policy_state), its
        episode windows start empty."""
        self.load_policy_state(dst, self.policies[src].state_dict(), self.optimizers[src].state_dict(),
                               self.hyperparams[src])

    def load_policy_state(self, dst: int, weights: dict, optimizer_state: dict, hyper: Dict[str, float]) -> None:
        """Policy `dst` takes these weights, optimizer state and hyperparameters. Invariant: a version
        names one set of weights, so `dst`'s version goes up by one (the caller publishes it: the
        workers reload on a version change only; PBT publishes it with door.publish_replacement, so that
        trajectories its old weights acted are dropped, not trained on as one version old). A load that
        fails part-way may have changed some weights: the version goes up all the same."""
        try:
            self.policies[dst].load_state_dict(weights)
            load_optimizer_state(self.optimizers[dst], copy.deepcopy(optimizer_state))
            self.set_hyperparams(dst, hyper)
            self.stats[dst].forget_episodes()
        finally:
            self.stats[dst].version += 1

    def state(self) -> List[Dict[str, float]]:
        """What a checkpoint keeps (its `sf_hydra` part's `hyperparams`)."""
        return [dict(h) for h in self.hyperparams]

    def restore(self, saved: Sequence[Dict[str, float]]) -> None:
        """A checkpoint's hyperparameters (`state`; none in one saved before PBT); the optimizers' own state,
        which Lightning restores, holds the values that live in their groups."""
        for hyper, values in zip(self.hyperparams, saved):
            hyper.update(values)


def adapt_lr(opt, kl: float, algo) -> None:
    """algo.lr_schedule=kl_adaptive_*: the learning rate down by 1.5 when the KL is over twice the threshold, up
    by 1.5 when under half of it, within [lr_adaptive_min, lr_adaptive_max]."""
    lr = opt.param_groups[0]["lr"]
    if kl > 2.0 * algo.lr_schedule_kl_threshold:
        set_lr(opt, max(lr / 1.5, algo.lr_adaptive_min))
    elif kl < 0.5 * algo.lr_schedule_kl_threshold:
        set_lr(opt, min(lr * 1.5, algo.lr_adaptive_max))


def decay_lr(opt, done: float, learning_rate: float) -> None:
    """algo.lr_schedule=linear_decay: `learning_rate` scaled down linearly to 0 as the budget's fraction `done`
    goes to 1."""
    set_lr(opt, learning_rate * max(0.0, 1.0 - done))


def set_lr(opt, lr: float) -> None:
    """The one writer of an optimizer's learning rate: every parameter group's (the schedules, PBT)."""
    for group in opt.param_groups:
        group["lr"] = lr


# The flags of torch.optim's Adam-family groups that choose an implementation of the same update, not the update.
KERNEL_FLAGS = ("fused", "foreach")


def fused_if_default(opt: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """`opt` rebuilt with `fused=True` when it is a torch.optim.Adam or AdamW of one parameter group left at the
    default implementation (fused and foreach unset) that the fused kernel takes (not differentiable; floating
    parameters on a device the kernel supports); otherwise `opt` itself. Invariant: the same update (the same
    formula, one kernel instead of a loop of small ops per parameter: float rounding may differ in the last bit).
    Why: on small models an optimizer step is dominated by per-op overhead (figures: docs/results.md)."""
    if type(opt) not in (torch.optim.Adam, torch.optim.AdamW) or len(opt.param_groups) != 1:
        return opt
    group = opt.param_groups[0]
    if any(group.get(flag) is not None for flag in KERNEL_FLAGS) or group.get("differentiable"):
        return opt
    settings = {k: v for k, v in group.items() if k != "params"}
    try:
        return type(opt)(group["params"], **{**settings, "fused": True})
    except (RuntimeError, ValueError, TypeError):  # a device or dtype the fused kernel does not take
        return opt


def kernel_flags(opt: torch.optim.Optimizer) -> List[Dict[str, object]]:
    """Each parameter group's implementation flags (KERNEL_FLAGS it has)."""
    return [{flag: group[flag] for flag in KERNEL_FLAGS if flag in group} for group in opt.param_groups]


def set_kernel_flags(opt: torch.optim.Optimizer, flags: List[Dict[str, object]]) -> None:
    for group, kept in zip(opt.param_groups, flags):
        group.update(kept)


def load_optimizer_state(opt: torch.optim.Optimizer, state: dict) -> None:
    """`opt.load_state_dict(state)` keeping `opt`'s own implementation flags (KERNEL_FLAGS): a state saved by an
    optimizer built otherwise (an older checkpoint, another run) brings its hyperparameters and moments, not its
    kernels (torch's load_state_dict takes the saved groups whole)."""
    kept = kernel_flags(opt)
    opt.load_state_dict(state)
    set_kernel_flags(opt, kept)


def apply_to_optimizer(opt, hyper: Dict[str, float]) -> None:
    """The hyperparameters that live in an optimizer's groups (lr; Adam's betas and eps), set
    where the group has them (a user's optimizer may have none of them)."""
    set_lr(opt, hyper["learning_rate"])
    for group in opt.param_groups:
        if "betas" in group:
            group["betas"] = (hyper["adam_beta1"], hyper["adam_beta2"])
        if "eps" in group:
            group["eps"] = hyper["adam_eps"]
