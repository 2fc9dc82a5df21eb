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
from sf_hydra.learner.losses import (
    approx_kl,
    entropy_loss,
    kl_penalty_loss,
    masked_mean,
    policy_loss,
    symmetric_kl_exploration_loss,
    value_loss,
)
from sf_hydra.learner.optimizers import PolicyOptimizers, adapt_lr, decay_lr, set_kernel_flags
from sf_hydra.learner.profile import RunProfile
from sf_hydra.learner.settings import LearnerSettings
from sf_hydra.learner.statistics import LearnerStatistics, PolicyStats
from sf_hydra.learner.vtrace import vtrace

# Trajectory fields the minibatches do without: what they say is in the advantages, targets and `valids` already.
NOT_TRAINED_ON = frozenset({"rewards", "time_outs", "policy_versions", "policy_ids"})


class PPOLearner(LearnerStatistics, PolicyOptimizers, L.LightningModule):
    """`algo.num_policies` policies (`self.policies`), each with its own model (normalizers
    inside), optimizer, version and statistics; a batch holds one policy's trajectories and
    trains that policy only on the transitions it acted (`batch["policy_ids"]`). This module is
    the update loop; the statistics (learner/statistics.py) and each policy's optimizer and
    hyperparameters, which PBT calls (learner/optimizers.py), are parts of their own."""

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
        self._start_statistics(settings.stats_avg)  # counters and windows (learner/statistics.py)
        # Each policy's own hyperparameters (config/choices.py PBT_HYPERPARAMS): the algo.* values,
        # changed only by population-based training; the optimizers' groups follow them.
        # With PBT, the env's reward-shaping weights are per-policy hyperparameters too.
        self.reward_shaping = dict(settings.reward_shaping)
        self.hyperparams = [dict(h) for h in settings.hyperparams]
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
        # a resumed checkpoint's optimizer state (restored by now) may name other kernels: ours stay
        for k, flags in enumerate(getattr(self, "kernel_flags", ())):
            set_kernel_flags(self.optimizer_of(k).optimizer, flags)

    def on_train_end(self) -> None:
        self.profile.stop()

    @property
    def model(self) -> torch.nn.Module:
        """Policy 0 (the only one unless algo.num_policies > 1)."""
        return self.policies[0]

    @property
    def policy_versions(self):
        return [s.version for s in self.stats]

    @property
    def policy_version(self) -> int:
        """Learner iterations of the run (summed over policies)."""
        return sum(self.policy_versions)

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

    def _minibatch_bounds(self, data: dict, full_chunks: Optional[int] = None) -> Tuple[dict, List[int]]:
        """The chunks an epoch trains on and its minibatches' bounds among them. Chunks that hold none of
        this policy's transitions (another policy acted there: `valids` all zero) are left out, so no forward
        or backward pass is spent on them, and `valids` goes where every chunk left is wholly the policy's
        own (always so for feed-forward models, one transition per chunk). Invariant: an epoch has as many
        minibatches as the whole batch gives, ceil(chunks / (batch_size / recurrence)); a batch with no chunk
        left out keeps the plain slices of that many chunks, the kept chunks of another spread evenly over
        them (what each minibatch averages over is the policy's own transitions either way). `full_chunks`:
        the chunks of a full batch, for a batch that took more trajectories to hold a full batch's own
        transitions (TrainingBatches, several policies): it gets a full batch's minibatches, not more."""
        n = data["actions"].shape[0]
        per_minibatch = self.algo.batch_size // self.recurrence
        plain = [*range(0, n, per_minibatch), n]
        oversized = full_chunks is not None and n > full_chunks
        if "valids" not in data and not oversized:
            return data, plain
        data = self._own_chunks(data)
        kept = data["actions"].shape[0]
        if kept == n and not oversized:
            return data, plain
        minibatches = min(len(range(0, full_chunks, per_minibatch)) if oversized else len(plain) - 1, kept)
        return data, [kept * i // minibatches for i in range(minibatches + 1)] if minibatches else [0]

    @staticmethod
    def _own_chunks(data: dict) -> dict:
        """The chunks holding any of the policy's transitions (`valids`), `valids` left out where every
        chunk kept is wholly the policy's own; data without `valids` as it is."""
        if "valids" not in data:
            return data
        mine = data["valids"] > 0
        keep = mine.any(dim=1)
        if not bool(keep.all()):
            data = {k: v[keep] for k, v in data.items()}
        if bool(mine[keep].all()):
            data = {k: v for k, v in data.items() if k != "valids"}
        return data

    def _full_chunks(self, meta: dict, batch: dict) -> Optional[int]:
        """The recurrence chunks of a full batch when this one took more trajectories than a full batch
        (`meta["full_trajectories"]`, set by TrainingBatches); None otherwise."""
        full = meta.get("full_trajectories")
        return None if not full else full * batch["actions"].shape[1] // self.recurrence

    # -- the iteration -----------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        meta = batch.pop("meta")
        k = meta["policy"]
        run = self._record_meta(meta, None if self.settings.benchmark else self._lag_moments(batch, k))
        if self.settings.benchmark:  # the sampler's ceiling: counted, not learned from
            self.last_policy = k
            self.last_metrics = {"learner/wait_for_data_sec": float(run["wait_seconds"]),
                                 **worker_shares(run["worker_seconds"])}
            self.log("env_steps", float(self.env_steps), on_step=True, logger=False, prog_bar=False)
            return
        model, stats, opt = self.policies[k], self.stats[k], self.optimizer_of(k)
        hyper = self.hyperparams[k]
        with self.profile.part("prepare_batch"):
            valid = self._valid(batch, k)
            obs = obs_fields_of(batch)
            model.preprocess.update(obs if valid is None else {key: v[valid > 0] for key, v in obs.items()})
            advantages, targets, old_values = self._advantages_and_targets(model, batch, valid, hyper["gamma"])
            data = self._chunks(batch, advantages, targets, old_values, valid)
            data, bounds = self._minibatch_bounds(data, self._full_chunks(meta, batch))
        t0 = time.perf_counter()
        stats.metrics = self._train_epochs(model, opt, stats, data, hyper, bounds)
        train_time = time.perf_counter() - t0
        stats.version += 1
        self.last_policy = k
        self.profile.mark_startup("first_update_s", seconds_since_launch())
        lag_min, lag_sum, lag_max, samples = run["lag"]  # every rank's transitions (_run_meta)
        stats.metrics.update({
            "policy_lag/min": lag_min, "policy_lag/avg": lag_sum / max(samples, 1), "policy_lag/max": lag_max,
            "learner/lr": opt.param_groups[0]["lr"],
            "learner/policy_version": float(stats.version),
            # the run's samples over this rank's training time (the ranks train in step: every minibatch's
            # gradients are averaged across them)
            "learner/samples_per_sec": samples * self.algo.num_epochs / max(train_time, 1e-9),
        })
        if self.reward_shaping and (true_return := stats.avg_true_return()) is not None:
            stats.metrics["episode/true_return"] = true_return  # beside episode/return, which is shaped
        self.last_metrics = {
            "learner/nonfinite_updates_skipped": float(self.nonfinite_skipped),
            "env/nonfinite_values": float(self.nonfinite_env_values),
            "env/restarts": float(self.env_restarts),
            "learner/dropped_trajectories": float(run["dropped_trajectories"]),
            "learner/dropped_trajectories_total": float(self.dropped_total),
            "learner/wait_for_data_sec": float(run["wait_seconds"]),
            **worker_shares(run["worker_seconds"]),
        }
        self.log("env_steps", float(self.env_steps), on_step=True, logger=False, prog_bar=False)

    def _lag_moments(self, batch: dict, k: int) -> Tuple[float, float, float, int]:
        """(min, sum, max, count) of how many versions policy `k`'s transitions in `batch` lag its learner."""
        lag = (self.stats[k].version - batch["policy_versions"]).float()
        valid = self._valid(batch, k)
        if valid is not None:
            lag = lag[valid > 0]
        if lag.numel() == 0:
            return (0.0, 0.0, 0.0, 0)
        return (lag.min().item(), lag.sum().item(), lag.max().item(), lag.numel())

    def _train_epochs(self, model, opt, stats: PolicyStats, data: dict, hyper: Dict[str, float],
                      bounds: Sequence[int]) -> Dict[str, float]:
        """`num_epochs` passes over the batch's chunks in minibatches, the i-th from chunk bounds[i] to bounds[i+1]
        of each epoch's order (`_minibatch_bounds`), its advantages normalized over the whole minibatch, every
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
        self.nonfinite_skipped += 1
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
        names, sums, parts = None, None, self._micro_batches(mb)
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

    def _micro_batches(self, mb: dict) -> List[Tuple[dict, Optional[float]]]:
        """(part, its weight: its share of the policy's transitions) of each micro-batch of whole recurrence
        chunks that holds some of them; the whole minibatch with no weight when it is one pass of one policy."""
        valid = mb.get("valids")
        rows = mb["actions"].shape[0]
        step = max(1, self.micro_batch // self.recurrence) if self.micro_batch > 0 else rows
        if step >= rows and valid is None:
            return [(mb, None)]
        # with several policies a micro-batch may hold none of this one's transitions (the host reads its share)
        total = float(valid.sum()) if valid is not None else float(rows)
        parts = []
        for start in range(0, rows, step):
            part = {k: v[start : start + step] for k, v in mb.items()}
            share = float(part["valids"].sum()) if valid is not None else float(part["actions"].shape[0])
            if share > 0:
                parts.append((part, share / total))
        return parts

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

    # -- statistics and checkpoints ------------------------------------------------------------
    # -- checkpoints ---------------------------------------------------------------------------
    def weights_finite(self) -> bool:
        return all(bool(torch.isfinite(t).all()) for t in self.state_dict().values() if t.is_floating_point())

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if not self.weights_finite():  # never replace a good checkpoint with a poisoned one
            raise NonFiniteTraining("the learner's weights are not finite: no checkpoint written")
        checkpoint["sf_hydra"] = {**self.statistics_state(), "hyperparams": [dict(h) for h in self.hyperparams]}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint["sf_hydra"]
        for k, saved in enumerate(state.get("hyperparams", [])):  # the optimizers' state holds them too
            self.hyperparams[k].update(saved)
        self.restore_statistics(state)
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


def worker_shares(seconds: Dict[str, float]) -> Dict[str, float]:
    """Where the rollout workers' time went since the last batch, as fractions."""
    total = sum(seconds.values())
    return {f"workers/{k}_fraction": v / total for k, v in seconds.items()} if total > 0 else {}
