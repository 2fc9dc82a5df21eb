"""The PPO learner as a LightningModule with manual optimization: asynchronous PPO (APPO,
`algo=appo`: trajectories may lag the policy by up to `max_policy_lag` versions) and
synchronous PPO (`algo=ppo`: each batch is what the current policy collected) differ only
on the sampling side, so one learner trains both.

It sees batches of whole trajectories and returns losses; it knows nothing of processes.
One `training_step` is one learner iteration of one policy: `num_epochs` passes over the
batch in minibatches of `batch_size` transitions, then that policy's version goes up by one.
"""

from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence, Tuple

import lightning as L
import torch

from sf_hydra.core.clock import seconds_since_launch
from sf_hydra.core.faults import NonFiniteTraining
from sf_hydra.core.trajectory import ACTION_DIST_PARAMS, TrajectorySpec, obs_fields_of
from sf_hydra.learner import ddp
from sf_hydra.learner.advantages import gae
from sf_hydra.learner.learner_settings import LearnerSettings
from sf_hydra.learner.losses import (
    approx_kl,
    entropy_loss,
    kl_penalty_loss,
    masked_mean,
    policy_loss,
    symmetric_kl_exploration_loss,
    value_loss,
)
from sf_hydra.learner.minibatches import full_chunks, micro_batches, minibatch_bounds
from sf_hydra.learner.optimizers import PolicyOptimizers, adapt_lr, decay_lr
from sf_hydra.learner.profile import RunProfile
from sf_hydra.learner.statistics import LearnerStatistics, PolicyStats
from sf_hydra.learner.vtrace import vtrace

# Trajectory fields the minibatches do without: what they say is in the advantages, targets and `valids` already.
NOT_TRAINED_ON = frozenset({"rewards", "time_outs", "policy_versions", "policy_ids"})


class PPOLearner(L.LightningModule):
    """`algo.num_policies` policies (`self.policies`), each with its own model (normalizers
    inside), optimizer, version and statistics; a batch holds one policy's trajectories and
    trains that policy only on the transitions it acted (`batch["policy_ids"]`). This module is
    the update loop; it holds two parts: `statistics` (the run's and each policy's counters and windows,
    learner/statistics.py) and `optimization` (each policy's optimizer and hyperparameters, which PBT
    calls, learner/optimizers.py)."""

    def __init__(self, policies: Sequence[torch.nn.Module], settings: LearnerSettings, spec: TrajectorySpec):
        """policies: the run plan's initial models (sf_hydra/plan.py), trained in place; settings: the
        algo's settings and what was resolved from them; spec: what the rollout workers record."""
        super().__init__()
        self.automatic_optimization = False
        self.settings, self.algo = settings, settings.algo
        self.num_policies = len(policies)
        self.policies = torch.nn.ModuleList(policies)
        self.spec = spec
        self.recurrence = settings.recurrence
        self.micro_batch = settings.micro_batch
        self.bf16 = settings.bf16  # forward passes in bfloat16 autocast (hardware.learner_precision)
        if self.bf16:  # bf16 convolutions measured faster channels-last (fp32 ones slower; acting is unchanged)
            for policy in self.policies:
                policy.to(memory_format=torch.channels_last)
        if settings.compile:  # the learner's forward pass; the workers' copies act uncompiled
            for policy in self.policies:
                policy.evaluate = torch.compile(policy.evaluate)
        self.statistics = LearnerStatistics(self.num_policies, settings.stats_avg, bool(settings.reward_shaping))
        self.optimization = PolicyOptimizers(self.policies, settings, self.statistics.stats)
        self.last_policy = 0  # the policy the last batch trained
        self.nonfinite_in_a_row = 0  # updates skipped for a non-finite loss or gradient, in a row
        self.profile = RunProfile()  # seconds per component, this session (learner/profile.py)
        self.gradient_syncs: List[ddp.GradientSync] = []  # per policy, made when training starts (on_train_start)

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        """Every field to the learner's device, each one copy (non-blocking from the pinned
        staging memory TrainingBatches gathers into for CUDA); `meta` stays on the host."""
        with self.profile.part("to_device"):
            if device.type == "cpu":
                return batch
            return {k: v if k == "meta" else v.to(device, non_blocking=True) for k, v in batch.items()}

    def on_train_start(self) -> None:
        self.profile = RunProfile()  # the session's clock starts with training, not with building the model
        self.gradient_syncs = [ddp.GradientSync(policy) for policy in self.policies]  # every rank, in one order
        self.optimization.keep_kernels()

    def on_train_end(self) -> None:
        self.profile.stop()

    def configure_optimizers(self):
        return self.optimization.build()

    def optimizer_of(self, policy: int):
        """Policy `policy`'s optimizer as the training loop steps it (Lightning's wrapper of `optimization`'s)."""
        opts = self.optimizers()
        return opts[policy] if isinstance(opts, (list, tuple)) else opts

    @property
    def model(self) -> torch.nn.Module:
        """Policy 0 (the only one unless algo.num_policies > 1)."""
        return self.policies[0]

    @property
    def policy_versions(self):
        return self.statistics.policy_versions

    @property
    def policy_version(self) -> int:
        """Learner iterations of the run (summed over policies)."""
        return sum(self.policy_versions)

    # -- the run's figures, read-only: the run's summary (app/train.py) and the callbacks read them ---------
    @property
    def env_steps(self) -> int:
        return self.statistics.env_steps

    @property
    def train_seconds(self) -> float:
        return self.statistics.train_seconds

    @property
    def episodes_total(self) -> int:
        return self.statistics.episodes_total

    @property
    def stats(self) -> List[PolicyStats]:
        return self.statistics.stats

    @property
    def hyperparams(self) -> List[Dict[str, float]]:
        return self.optimization.hyperparams

    def avg_return(self):
        return self.statistics.avg_return()

    def avg_length(self):
        return self.statistics.avg_length()

    # -- data preparation --------------------------------------------------------------------
    @staticmethod
    def _valid(batch: dict, policy: int):
        """[B, T] 1.0 where `policy` acted, or None when it acted everywhere."""
        if "policy_ids" not in batch:
            return None
        mine = batch["policy_ids"] == policy
        return None if bool(mine.all()) else mine.float()

    @torch.no_grad()
    def _advantages_and_targets(self, model, batch: dict, valid, gamma: float):
        """GAE (or V-trace with algo.with_vtrace) in raw return units; value targets and old
        values in the value head's units. Another policy's transitions in the batch are
        separated from ours by dones (policies change at episode ends), so neither estimator
        mixes them in; they only skip the statistics."""
        norm = model.returns_norm
        values = norm.denormalize(batch["values"]) if norm is not None else batch["values"]
        log_rhos = None
        if self.algo.with_vtrace:
            # V-trace wants the current policy and critic: log pi(a_t|x_t) and V(x_t) from the model as
            # it is now; the behaviour's value of the state after the rollout stays the bootstrap.
            log_probs, current = self._current_outputs(model, batch)
            current = norm.denormalize(current) if norm is not None else current
            values = torch.cat([current, values[:, -1:]], dim=1)
            log_rhos = log_probs - batch["log_probs"]
            if valid is not None:
                log_rhos = torch.where(valid > 0, log_rhos, 0.0)  # another policy's ratio says nothing (may overflow)
        rewards = batch["rewards"]
        if self.algo.value_bootstrap:  # a truncated episode would have gone on: add gamma*V(s)
            rewards = rewards + gamma * values[:, :-1] * batch["time_outs"]
        if log_rhos is not None:
            returns, advantages = vtrace(log_rhos, rewards, values, batch["dones"], gamma, self.algo.vtrace_rho,
                                         self.algo.vtrace_c)
        else:
            advantages, returns = gae(rewards, values, batch["dones"], gamma, self.algo.gae_lambda)
        if norm is not None:
            mine = returns if valid is None else returns[valid > 0]
            # a non-finite return would poison the statistics for good: none of this batch's returns go in (every
            # rank calls update, with no rows then: data-parallel ranks merge each other's moments)
            norm.update(mine if bool(torch.isfinite(mine).all()) else mine[:0])
            return advantages, norm.normalize(returns), norm.normalize(values[:, :-1])
        return advantages, returns, values[:, :-1]

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, ...] -> [B*T/R, R, ...] recurrence chunks."""
        return x.reshape(-1, self.recurrence, *x.shape[2:])

    @torch.no_grad()
    def _current_outputs(self, model, batch: dict):
        """The current model's log-probs of the batch's actions and its values, [B, T] each,
        evaluated over the same recurrence chunks (each from its recorded RNN state) and
        micro-batches as training evaluates them."""
        b, t = batch["actions"].shape[:2]
        obs = {k: self._split(v) for k, v in obs_fields_of(batch).items()}
        actions, dones = self._split(batch["actions"]), self._split(batch["dones"])
        rnn = self._split(batch["rnn_states"])[:, 0] if "rnn_states" in batch else None
        rows = actions.shape[0]
        step = max(1, self.micro_batch // self.recurrence) if self.micro_batch > 0 else rows
        log_probs, values = [], []
        for i in range(0, rows, step):
            part = slice(i, i + step)
            with self._forward_precision(actions.device):
                lp, _, v = model.evaluate({k: o[part] for k, o in obs.items()}, actions[part],
                                          None if rnn is None else rnn[part], dones[part])
            log_probs.append(lp)
            values.append(v)
        return torch.cat(log_probs).reshape(b, t).float(), torch.cat(values).reshape(b, t).float()

    def _chunks(self, batch: dict, advantages, targets, old_values, valid) -> dict:
        """[B, T] -> [B*T/R, R] recurrence chunks, every field of the trajectory spec the losses
        read (not NOT_TRAINED_ON) by one rule: a bootstrap field drops its extra step (values are
        replaced by the learner's own `old_values`, `targets` and `advantages`), a chunk-start field
        keeps the first step of each chunk (the RNN state a chunk's unroll starts from)."""
        split = self._split
        data = {}
        for field in self.spec:
            if field.bootstrap or field.name in NOT_TRAINED_ON:
                continue
            chunks = split(batch[field.name])
            data[field.name] = chunks[:, 0] if field.chunk_start_only else chunks
        data.update(advantages=split(advantages), targets=split(targets), old_values=split(old_values))
        if valid is not None:
            data["valids"] = split(valid)
        return data

    # -- the iteration -----------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        meta = batch.pop("meta")
        k = meta["policy"]
        self.profile.add_batch(meta)
        lag = None if self.settings.benchmark else self.statistics.lag_moments(k, batch["policy_versions"],
                                                                                self._valid(batch, k))
        run = self.statistics.record(meta, lag)
        if self.settings.benchmark:  # the sampler's ceiling: counted, not learned from
            self.last_policy = k
            self.statistics.set_run_metrics(run, counters=False)
            self.log("env_steps", float(self.env_steps), on_step=True, logger=False, prog_bar=False)
            return
        model, stats, opt = self.policies[k], self.statistics.stats[k], self.optimizer_of(k)
        hyper = self.optimization.hyperparams[k]
        with self.profile.part("prepare_batch"):
            valid = self._valid(batch, k)
            obs = obs_fields_of(batch)
            model.preprocess.update(obs if valid is None else {key: v[valid > 0] for key, v in obs.items()})
            advantages, targets, old_values = self._advantages_and_targets(model, batch, valid, hyper["gamma"])
            data = self._chunks(batch, advantages, targets, old_values, valid)
            data, bounds = minibatch_bounds(data, self.algo.batch_size // self.recurrence,
                                            full_chunks(meta, batch["actions"].shape[1], self.recurrence))
        t0 = time.perf_counter()
        metrics = self._train_epochs(model, opt, stats, data, hyper, bounds)
        train_time = time.perf_counter() - t0
        self.statistics.record_update(k, metrics, run, opt.param_groups[0]["lr"],
                                      self.algo.num_epochs / max(train_time, 1e-9))
        self.last_policy = k
        self.profile.mark_startup("first_update_s", seconds_since_launch())
        self.statistics.set_run_metrics(run)
        self.log("env_steps", float(self.env_steps), on_step=True, logger=False, prog_bar=False)

    def _train_epochs(self, model, opt, stats: PolicyStats, data: dict, hyper: Dict[str, float],
                      bounds: Sequence[int]) -> Dict[str, float]:
        """`num_epochs` passes over the batch's chunks in minibatches, the i-th from chunk bounds[i] to bounds[i+1]
        of each epoch's order (learner/minibatches.py), its advantages normalized over the whole minibatch, every
        rank's share of it (the moments of every minibatch of the step drawn up front, one reduction:
        advantage_moments). The minibatches' statistics add up as one tensor
        on the learner's device and are read once at the end: the one host sync per minibatch is whether its
        loss and gradient norm are finite (a non-finite update is skipped, `_skip_nonfinite_update`)."""
        algo = self.algo
        n_chunks = data["actions"].shape[0]
        max_grad_norm = hyper["max_grad_norm"]
        adapt_per_minibatch = algo.lr_schedule == "kl_adaptive_minibatch"
        adapt_per_epoch = algo.lr_schedule == "kl_adaptive_epoch"
        params = list(model.parameters())
        device = data["actions"].device  # indices on the data's device: no host round trip per minibatch
        names, sums, count = None, None, 0
        orders = [torch.randperm(n_chunks, device=device) if algo.shuffle_minibatches else None
                  for _ in range(algo.num_epochs)]
        spans = list(zip(bounds, bounds[1:]))
        moments = iter(advantage_moments(data, orders, spans))  # every minibatch's of the step: one reduction
        for order in orders:
            # one gather per field and epoch; the minibatches are slices of it
            epoch = data if order is None else {k: v[order] for k, v in data.items()}
            for start, stop in spans:
                mb = {k: v[start:stop] for k, v in epoch.items()}
                mb["advantages"] = normalized_advantages(mb["advantages"], mb.get("valids"), next(moments))
                if "valids" in mb and not bool(mb["valids"].any()):
                    continue  # none of this policy's transitions in this minibatch
                with self.profile.part("forward_backward"):
                    opt.zero_grad(set_to_none=True)
                    # every rank's average gradient and losses (learner/ddp.py GradientSync)
                    losses = self._accumulate_gradients(model, mb, hyper)
                with self.profile.part("optimizer"):
                    grad_norm = self._grad_norm(params)
                    # the update's one host sync
                    if not bool(torch.isfinite(torch.stack([losses["loss/total"].float(), grad_norm.float()])).all()):
                        self._skip_nonfinite_update(opt, losses, grad_norm)
                        continue
                    self.nonfinite_in_a_row = 0
                    if max_grad_norm > 0:  # as clip_grad_norm_, from the norm just computed
                        torch.nn.utils.clip_grads_with_norm_(params, max_grad_norm, grad_norm)
                    opt.step()
                names = names or [*losses, "learner/grad_norm"]
                values = torch.stack([*losses.values(), grad_norm.to(losses["loss/total"].dtype)])
                sums = values if sums is None else sums + values
                count += 1
                if adapt_per_minibatch:
                    adapt_lr(opt, float(losses["learner/kl"]), self.algo)
            if adapt_per_epoch and count:
                adapt_lr(opt, float(sums[names.index("learner/kl")]) / count, self.algo)
        if algo.lr_schedule == "linear_decay":
            decay_lr(opt, stats.env_steps / float(self.settings.train_for_env_steps), hyper["learning_rate"])
        return dict(zip(names, (sums / count).tolist())) if count else {}

    def _skip_nonfinite_update(self, opt, losses: dict, grad_norm) -> None:
        """No optimizer step from a NaN/inf loss or gradient (the weights stay finite); after
        algo.nonfinite_updates_limit such updates in a row the run stops."""
        opt.zero_grad(set_to_none=True)
        self.nonfinite_in_a_row += 1
        self.statistics.nonfinite_skipped += 1
        limit = self.algo.nonfinite_updates_limit
        if self.nonfinite_in_a_row >= limit:
            raise NonFiniteTraining(
                f"{self.nonfinite_in_a_row} learner updates in a row had a non-finite loss or gradient (last: loss "
                f"{float(losses['loss/total'])}, gradient norm {float(grad_norm)}); each was skipped, so the weights "
                f"and the checkpoint stay finite (algo.nonfinite_updates_limit={limit}). Lower algo.learning_rate, "
                "check the env's rewards (env.reward_scale, env.reward_clip) or observations")

    def _accumulate_gradients(self, model, mb: dict, hyper: Dict[str, float]) -> Dict[str, torch.Tensor]:
        """Backward over the minibatch (its advantages normalized: _train_epochs) in micro-batches of whole
        recurrence chunks. Every loss is a mean over the policy's transitions, so weighting each micro-batch by
        its share of them gives the minibatch's gradient and statistics exactly. With several ranks the last
        backward pass averages the gradients and statistics over them (GradientSync). Returns the statistics as
        0-d tensors (no host sync)."""
        sync = self._sync_of(model)
        names, sums, parts = None, None, micro_batches(mb, self.micro_batch, self.recurrence)
        for i, (part, weight) in enumerate(parts):
            last = i == len(parts) - 1
            with sync.accumulating(last):
                losses = self._minibatch_losses(model, part, hyper)
                loss, values = losses["loss/total"], torch.stack([v.detach() for v in losses.values()])
                if weight is not None:
                    loss, values = loss * weight, values * weight
                names, sums = names or list(losses), values if sums is None else sums + values
                if last:
                    sync.carry(sums)
                self.manual_backward(loss)
        return dict(zip(names, sync.carried().unbind())) if names else {}

    def _sync_of(self, model) -> ddp.GradientSync:
        """The gradient sync of policy `model` (made when training starts); a one-rank one otherwise."""
        return next((s for s in self.gradient_syncs if s.policy is model), None) or ddp.GradientSync(model)

    def _minibatch_losses(self, model, mb: dict, hyper: Dict[str, float]) -> Dict[str, torch.Tensor]:
        """The PPO losses of one (micro-)batch; its advantages are normalized already. The
        exploration loss is the entropy's negative or the symmetric KL to a uniform prior
        (algo.exploration_loss); with algo.kl_loss_coeff > 0, the exact KL from the behaviour
        policy's recorded distribution is added."""
        h, valid, algo = hyper, mb.get("valids"), self.algo
        obs = obs_fields_of(mb)
        symmetric_kl = algo.exploration_loss == "symmetric_kl"
        need_dist = symmetric_kl or algo.kl_loss_coeff > 0
        with self._forward_precision(mb["actions"].device):
            out = self._sync_of(model).evaluate(obs, mb["actions"], mb.get("rnn_states"), mb["dones"],
                                                with_distribution=need_dist)
        log_probs, entropy, values = (x.float() for x in out[:3])  # the losses in float32
        adv = mb["advantages"]
        p_loss, ratio, clip_fraction = policy_loss(log_probs, mb["log_probs"], adv, h["ppo_clip_ratio"], valid)
        v_loss = value_loss(values, mb["old_values"], mb["targets"], h["ppo_clip_value"], valid)
        if symmetric_kl:
            kl_to_uniform = out[3].symmetric_kl_with_uniform_prior().float()
            e_loss = symmetric_kl_exploration_loss(kl_to_uniform.reshape(ratio.shape), valid)
        else:
            e_loss = entropy_loss(entropy, valid)
        total = p_loss + h["value_loss_coeff"] * v_loss + h["exploration_loss_coeff"] * e_loss
        losses = {}
        if algo.kl_loss_coeff > 0:
            old_params = mb[ACTION_DIST_PARAMS]
            behaviour_kl = out[3].kl_to(old_params.reshape(-1, old_params.shape[-1])).float().reshape(ratio.shape)
            k_loss = kl_penalty_loss(behaviour_kl, valid)
            total = total + algo.kl_loss_coeff * k_loss
            losses["loss/kl"] = k_loss.detach()
        with torch.no_grad():
            kl = approx_kl(ratio, valid)
        return {
            "loss/total": total, "loss/policy": p_loss.detach(), "loss/value": v_loss.detach(),
            "loss/entropy": masked_mean(entropy.detach(), valid), "loss/exploration": e_loss.detach(),
            "learner/kl": kl, "learner/clip_fraction": clip_fraction, **losses,
        }

    def _forward_precision(self, device: torch.device):
        """bfloat16 autocast for a forward pass with hardware.learner_precision resolved to bf16, else nothing."""
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.bf16)

    @staticmethod
    def _grad_norm(params) -> torch.Tensor:
        """The global L2 norm of the parameters' gradients, a 0-d tensor on their device (0 without any)."""
        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            return torch.zeros((), device=params[0].device) if params else torch.zeros(())
        return torch.nn.utils.get_total_norm(grads)

    # -- checkpoints ---------------------------------------------------------------------------
    def weights_finite(self) -> bool:
        return all(bool(torch.isfinite(t).all()) for t in self.state_dict().values() if t.is_floating_point())

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if not self.weights_finite():  # never replace a good checkpoint with a poisoned one
            raise NonFiniteTraining("the learner's weights are not finite: no checkpoint written")
        checkpoint["sf_hydra"] = {**self.statistics.state(), "hyperparams": self.optimization.state()}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint["sf_hydra"]
        self.optimization.restore(state.get("hyperparams", []))
        self.statistics.restore(state)
        if "policies" not in state:  # saved before several policies: one policy, its model under `model.`
            weights = checkpoint["state_dict"]
            for key in [k for k in weights if k.startswith("model.")]:
                weights["policies.0." + key[len("model."):]] = weights.pop(key)


def advantage_moments(data: dict, orders: Sequence[Optional[torch.Tensor]],
                      spans: Sequence[Tuple[int, int]]) -> List[Tuple[int, torch.Tensor, torch.Tensor]]:
    """(count, mean, std) of the advantages of the policy's own transitions (`valids`) of every minibatch of a
    learner step, epoch after epoch (each epoch's chunks in its order, None: as they are; each minibatch from
    chunk start to stop of it), every learner rank's share of each minibatch together (learner/ddp.py moments,
    one reduction for the step): the ranks train as one run on one minibatch."""
    adv, valid = data["advantages"], data.get("valids")
    pieces = []
    for order in orders:
        a, v = (adv, valid) if order is None else (adv[order], None if valid is None else valid[order])
        pieces += [a[s:e] if v is None else a[s:e][v[s:e] > 0] for s, e in spans]
    return ddp.moments(pieces)


def normalized_advantages(adv: torch.Tensor, valid: Optional[torch.Tensor],
                          moments: Tuple[int, torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """A minibatch's advantages less their mean, over their standard deviation: its `moments`, over the policy's
    own transitions (`valid`) of the whole minibatch, every learner rank's share of it (advantage_moments).
    Zeros where fewer than two transitions are the policy's."""
    count, mean, std = moments
    if valid is None:
        return (adv - mean) / (std + 1e-8)
    return (adv - mean) / (std + 1e-8) * valid if count > 1 else adv * 0.0

