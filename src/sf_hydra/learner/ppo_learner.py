"""The PPO learner as a LightningModule with manual optimization: asynchronous PPO (APPO,
`algo=appo`: trajectories may lag the policy by up to `max_policy_lag` versions) and
synchronous PPO (`algo=ppo`: each batch is what the current policy collected) differ only
on the sampling side, so one learner trains both.

It sees batches of whole trajectories and returns losses; it knows nothing of processes.
One `training_step` is one learner iteration of one policy: `num_epochs` passes over the
batch in minibatches of `batch_size` transitions, then that policy's version goes up by one.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from typing import Dict, List, Sequence, Tuple

import lightning as L
import numpy as np
import torch

from sf_hydra.faults import NonFiniteTraining
from sf_hydra.games import pool_outcome
from sf_hydra.launch.clock import seconds_since_launch
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
from sf_hydra.learner.profile import RunProfile
from sf_hydra.learner.vtrace import vtrace
from sf_hydra.metric_names import DRAW, LOSS, TRUE_OBJECTIVE, WIN, outcome_rate
from sf_hydra.plan import LearnerSettings, initial_hyperparams
from sf_hydra.trajectory import ACTION_DIST_PARAMS, TrajectorySpec, obs_fields_of

# Trajectory fields the minibatches do without: what they say is in the advantages, targets and `valids` already.
NOT_TRAINED_ON = frozenset({"rewards", "time_outs", "policy_versions", "policy_ids"})


class PolicyStats:
    """One trained policy's counters and statistics (saved in checkpoints): its version, its
    own env steps, its episodes (return, length and the statistics the env reports at an
    episode's end, `info["episode_extra_stats"]`), its self-play outcomes and its last
    learner metrics.

    Beside each episode's return (shaped: what the policy was paid, reward-shaping weights of its
    own included) it keeps its true return (without that policy's own shaping bonus: at the env's
    declared weights, one scale for the whole population). Invariant: `true_returns` and
    `episode_returns` get one value per episode, equal when the policy has no shaping of its own."""

    def __init__(self, stats_avg: int):
        self.version = 0
        self.env_steps = 0
        self.episode_returns: deque = deque(maxlen=stats_avg)
        self.true_returns: deque = deque(maxlen=stats_avg)
        self.episode_lengths: deque = deque(maxlen=stats_avg)
        self.episode_extra: Dict[str, deque] = {}  # name -> the last stats_avg values
        self.episodes_total = 0
        self.outcomes: deque = deque(maxlen=stats_avg)  # WIN/DRAW/LOSS against the opponent pool
        self.metrics: Dict[str, float] = {}

    def add_extra(self, stats: dict) -> None:
        for name, value in stats.items():
            window = self.episode_extra.get(name)
            if window is None:
                window = self.episode_extra[name] = deque(maxlen=self.episode_returns.maxlen)
            window.append(float(value))

    def avg_extra(self) -> Dict[str, float]:
        return {name: float(np.mean(w)) for name, w in self.episode_extra.items() if w}

    def forget_episodes(self) -> None:
        """Its episode windows emptied (PBT gave it another policy's weights: what it played
        before says nothing of them)."""
        self.episode_returns.clear()
        self.true_returns.clear()
        self.episode_lengths.clear()
        self.episode_extra.clear()

    def avg_return(self):
        return float(np.mean(self.episode_returns)) if self.episode_returns else None

    def avg_true_return(self):
        """The average true (unshaped) return; None before any episode."""
        return float(np.mean(self.true_returns)) if self.true_returns else None

    def true_objective(self):
        """What PBT ranks by under `true_objective` (Sample Factory's name): the env's own
        `true_objective` statistic when it reports one at its episodes' ends, else the average true
        return (never the shaped one: the shaping weights are themselves mutated, and ranking by
        what they pay would select for inflated weights). None before any episode."""
        own = self.avg_extra().get(TRUE_OBJECTIVE)
        return own if own is not None else self.avg_true_return()

    def avg_length(self):
        return float(np.mean(self.episode_lengths)) if self.episode_lengths else None

    def outcome_rates(self) -> Dict[str, float]:
        if not self.outcomes:
            return {}
        return {outcome_rate(r): sum(o == r for o in self.outcomes) / len(self.outcomes)
                for r in (WIN, DRAW, LOSS)}

    def state(self) -> dict:
        return {"version": self.version, "env_steps": self.env_steps, "episode_returns": list(self.episode_returns),
                "true_returns": list(self.true_returns), "episode_lengths": list(self.episode_lengths),
                "episodes_total": self.episodes_total,
                "outcomes": list(self.outcomes), "episode_extra": {k: list(w) for k, w in self.episode_extra.items()}}

    def restore(self, state: dict) -> None:
        self.version, self.env_steps = state["version"], state["env_steps"]
        self.episodes_total = state["episodes_total"]
        self.episode_returns.extend(state["episode_returns"])
        # Saved before true returns were kept: the returns stand in (true unless PBT shaped them).
        self.true_returns.extend(state.get("true_returns", state["episode_returns"]))
        self.episode_lengths.extend(state["episode_lengths"])
        self.outcomes.extend(state.get("outcomes", []))
        for name, values in state.get("episode_extra", {}).items():
            for v in values:
                self.add_extra({name: v})


class PPOLearner(L.LightningModule):
    """`algo.num_policies` policies (`self.policies`), each with its own model (normalizers
    inside), optimizer, version and statistics; a batch holds one policy's trajectories and
    trains that policy only on the transitions it acted (`batch["policy_ids"]`)."""

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
        # Counters that survive a resume (saved in on_save_checkpoint).
        self.stats = [PolicyStats(settings.stats_avg) for _ in range(self.num_policies)]
        # Each policy's own hyperparameters (config/choices.py PBT_HYPERPARAMS): the algo.* values,
        # changed only by population-based training; the optimizers' groups follow them.
        # With PBT, the env's reward-shaping weights are per-policy hyperparameters too.
        self.reward_shaping = dict(settings.reward_shaping)
        self.hyperparams = [dict(h) for h in settings.hyperparams]
        self.env_steps = 0  # frames of the whole run (every policy's, snapshots' too)
        self.train_seconds = 0.0
        self.episode_returns: deque = deque(maxlen=settings.stats_avg)  # every trained policy's episodes
        self.episode_lengths: deque = deque(maxlen=settings.stats_avg)
        self.episodes_total = 0
        self.dropped_total = 0  # trajectories older than max_policy_lag, this session
        # Multi-agent games of two or more players (sf_hydra/games.py), the newest last: the league
        # (learner/league.py) takes them as they come; the oldest go first if nothing takes them.
        self.games: deque = deque(maxlen=10_000)
        self.last_metrics: Dict[str, float] = {}  # the run's own (not per policy)
        self.last_policy = 0  # the policy the last batch trained
        self.nonfinite_in_a_row = 0  # updates skipped for a non-finite loss or gradient, in a row
        self.nonfinite_skipped = 0  # ... this session
        self.nonfinite_env_values = 0  # env values the workers replaced by 0 (env.nonfinite=replace), this session
        self.env_restarts = 0  # envs the workers re-created after a crash or hang, this session
        self.profile = RunProfile()  # seconds per component, this session (learner/profile.py)

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        """Every field to the learner's device, each one copy (non-blocking from the pinned
        staging memory TrainingBatches gathers into for CUDA); `meta` stays on the host."""
        with self.profile.part("to_device"):
            if device.type == "cpu":
                return batch
            return {k: v if k == "meta" else v.to(device, non_blocking=True) for k, v in batch.items()}

    def on_train_start(self) -> None:
        self.profile = RunProfile()  # the session's clock starts with training, not with building the model
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

    def configure_optimizers(self):
        """`algo.optimizer` (a `_partial_` node, default Adam reading algo.learning_rate/adam_*)
        called with each policy's parameters."""
        optimizers = [fused_if_default(self.settings.optimizer(m.parameters())) for m in self.policies]
        for opt, hyper in zip(optimizers, self.hyperparams):
            if any(hyper[n] != v for n, v in initial_hyperparams(self.algo).items()):  # pbt.initial_hyperparams
                apply_to_optimizer(opt, hyper)
        self.kernel_flags = [kernel_flags(opt) for opt in optimizers]  # on_train_start keeps them over a resume
        return optimizers

    def optimizer_of(self, policy: int):
        opts = self.optimizers()
        return opts[policy] if isinstance(opts, (list, tuple)) else opts

    # -- population-based training (learner/pbt.py) -------------------------------------------
    def objective(self, policy: int, name: str):
        """Policy `policy`'s average of `name` over its last episodes: for `true_objective`,
        PolicyStats.true_objective (the env's own, else the unshaped return), else a statistic the
        env reports; None before any episode."""
        stats = self.stats[policy]
        return stats.true_objective() if name == TRUE_OBJECTIVE else stats.avg_extra().get(name)

    def set_hyperparams(self, policy: int, hyper: Dict[str, float]) -> None:
        self.hyperparams[policy] = dict(hyper)
        apply_to_optimizer(self.optimizer_of(policy).optimizer, hyper)

    def copy_policy(self, src: int, dst: int) -> None:
        """Policy `dst` becomes a copy of `src`: weights and normalizers, optimizer state and
        hyperparameters; its own counters stay, its version goes up by one (load_policy_state), its
        episode windows start empty."""
        self.load_policy_state(dst, self.policies[src].state_dict(), self.optimizer_of(src).optimizer.state_dict(),
                               self.hyperparams[src])

    def load_policy_state(self, dst: int, weights: dict, optimizer_state: dict, hyper: Dict[str, float]) -> None:
        """Policy `dst` takes these weights, optimizer state and hyperparameters. Invariant: a version
        names one set of weights, so `dst`'s version goes up by one (the caller publishes it: the
        workers reload on a version change only; PBT publishes it with door.publish_replacement, so that
        trajectories its old weights acted are dropped, not trained on as one version old). A load that
        fails part-way may have changed some weights: the version goes up all the same."""
        try:
            self.policies[dst].load_state_dict(weights)
            load_optimizer_state(self.optimizer_of(dst).optimizer, copy.deepcopy(optimizer_state))
            self.set_hyperparams(dst, hyper)
            self.stats[dst].forget_episodes()
        finally:
            self.stats[dst].version += 1

    # -- data preparation --------------------------------------------------------------------
    def _run_meta(self, meta: dict) -> dict:
        """What the run counts of a batch's meta: its frames, episodes, games and sampler counters, summed
        (episodes and games listed) over every learner rank's batch of this step in rank order (learner/ddp.py);
        with one rank, this rank's."""
        keys = ("frames", "episodes", "games", "nonfinite_replaced", "env_restarts", "dropped_trajectories")
        mine = {k: meta.get(k, 0) for k in keys}
        ranks = ddp.gather(mine)
        if len(ranks) == 1:
            return mine
        listed = ("episodes", "games")
        return {k: [x for r in ranks for x in r[k]] if k in listed else sum(int(r[k]) for r in ranks) for k in keys}

    def _record_meta(self, meta: dict) -> None:
        run = self._run_meta(meta)
        self.env_steps += int(run["frames"])
        self.profile.learner["wait_for_data"] += meta["wait_seconds"]
        self.profile.learner["gather_batch"] += meta.get("gather_seconds", 0.0)
        self.profile.learner["start_workers"] += meta.get("start_seconds", 0.0)
        self.profile.add_workers(meta["worker_seconds"])
        self.profile.mark_startup("first_rollout_s", meta.get("first_rollout_s"))
        self.profile.mark_startup("first_trajectory_s", meta.get("first_trajectory_s"))
        if self.num_policies == 1:
            self.stats[0].env_steps = self.env_steps
        else:
            for stats, frames in zip(self.stats, meta["policy_frames"]):
                stats.env_steps += int(frames)
        for e in run["episodes"]:
            if e.policy >= self.num_policies:
                continue  # a snapshot's game: not ours to report
            for window in (self, self.stats[e.policy]):
                window.episode_returns.append(e.ret)
                window.episode_lengths.append(e.length)
                window.episodes_total += 1
            self.stats[e.policy].true_returns.append(e.ret if e.true_ret is None else e.true_ret)
            if e.extra:
                self.stats[e.policy].add_extra(e.extra)
            if e.agent is not None:
                self._agent_episodes(e.agent).append((e.ret, e.length))
        for game in run["games"]:
            outcome = pool_outcome(game, self.num_policies)
            if outcome is not None:
                self.stats[outcome[0]].outcomes.append(outcome[1])
            self.games.append(game)
        self.nonfinite_env_values += int(run["nonfinite_replaced"])
        self.env_restarts += int(run["env_restarts"])
        self.dropped_total += int(run["dropped_trajectories"])

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

    def _minibatch_bounds(self, data: dict) -> Tuple[dict, List[int]]:
        """The chunks an epoch trains on and its minibatches' bounds among them. Chunks that hold none of
        this policy's transitions (another policy acted there: `valids` all zero) are left out, so no forward
        or backward pass is spent on them, and `valids` goes where every chunk left is wholly the policy's
        own (always so for feed-forward models, one transition per chunk). Invariant: an epoch has as many
        minibatches as the whole batch gives, ceil(chunks / (batch_size / recurrence)); a batch with no chunk
        left out keeps the plain slices of that many chunks, the kept chunks of another spread evenly over
        them (what each minibatch averages over is the policy's own transitions either way)."""
        n = data["actions"].shape[0]
        plain = [*range(0, n, self.algo.batch_size // self.recurrence), n]
        if "valids" not in data:
            return data, plain
        mine = data["valids"] > 0
        keep = mine.any(dim=1)
        kept = int(keep.sum())
        if kept < n:
            data = {k: v[keep] for k, v in data.items()}
        if bool(mine[keep].all()):
            data = {k: v for k, v in data.items() if k != "valids"}
        if kept == n:
            return data, plain
        minibatches = min(len(plain) - 1, kept)
        return data, [kept * i // minibatches for i in range(minibatches + 1)] if minibatches else [0]

    # -- the iteration -----------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        meta = batch.pop("meta")
        self._record_meta(meta)
        k = meta["policy"]
        if self.settings.benchmark:  # the sampler's ceiling: counted, not learned from
            self.last_policy = k
            self.last_metrics = {"learner/wait_for_data_sec": float(meta["wait_seconds"]),
                                 **worker_shares(meta["worker_seconds"])}
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
            data, bounds = self._minibatch_bounds(data)
        lag = (stats.version - batch["policy_versions"]).float()
        if valid is not None:
            lag = lag[valid > 0]
        t0 = time.perf_counter()
        stats.metrics = self._train_epochs(model, opt, stats, data, hyper, bounds)
        train_time = time.perf_counter() - t0
        stats.version += 1
        self.last_policy = k
        self.profile.mark_startup("first_update_s", seconds_since_launch())
        stats.metrics.update({
            "policy_lag/min": lag.min().item(), "policy_lag/avg": lag.mean().item(), "policy_lag/max": lag.max().item(),
            "learner/lr": opt.param_groups[0]["lr"],
            "learner/policy_version": float(stats.version),
            "learner/samples_per_sec": lag.numel() * self.algo.num_epochs / max(train_time, 1e-9),
        })
        if self.reward_shaping and (true_return := stats.avg_true_return()) is not None:
            stats.metrics["episode/true_return"] = true_return  # beside episode/return, which is shaped
        self.last_metrics = {
            "learner/nonfinite_updates_skipped": float(self.nonfinite_skipped),
            "env/nonfinite_values": float(self.nonfinite_env_values),
            "env/restarts": float(self.env_restarts),
            "learner/dropped_trajectories": float(meta["dropped_trajectories"]),
            "learner/dropped_trajectories_total": float(self.dropped_total),
            "learner/wait_for_data_sec": float(meta["wait_seconds"]),
            **worker_shares(meta["worker_seconds"]),
        }
        self.log("env_steps", float(self.env_steps), on_step=True, logger=False, prog_bar=False)

    def _train_epochs(self, model, opt, stats: PolicyStats, data: dict, hyper: Dict[str, float],
                      bounds: Sequence[int]) -> Dict[str, float]:
        """`num_epochs` passes over the batch's chunks in minibatches, the i-th from chunk bounds[i] to bounds[i+1]
        of each epoch's order (`_minibatch_bounds`). The minibatches' statistics add up as one tensor
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
        for _ in range(algo.num_epochs):
            epoch = data
            if algo.shuffle_minibatches:  # one gather per field and epoch; the minibatches are slices of it
                order = torch.randperm(n_chunks, device=device)
                epoch = {k: v[order] for k, v in data.items()}
            for start, stop in zip(bounds, bounds[1:]):
                mb = {k: v[start:stop] for k, v in epoch.items()}
                if "valids" in mb and not bool(mb["valids"].any()):
                    continue  # none of this policy's transitions in this minibatch
                with self.profile.part("forward_backward"):
                    opt.zero_grad(set_to_none=True)
                    losses = self._accumulate_gradients(model, mb, hyper)
                    losses = ddp.average_gradients(params, losses)  # every rank's (learner/ddp.py)
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
                    self._adapt_lr(opt, float(losses["learner/kl"]))
            if adapt_per_epoch and count:
                self._adapt_lr(opt, float(sums[names.index("learner/kl")]) / count)
        if algo.lr_schedule == "linear_decay":
            self._decay_lr(opt, stats.env_steps, hyper["learning_rate"])
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
        """Backward over the minibatch in micro-batches of whole recurrence chunks. Every loss
        is a mean over the policy's transitions, so weighting each micro-batch by its share of
        them gives the minibatch's gradient and statistics exactly; advantages are normalized
        over the whole minibatch first. Returns the statistics as 0-d tensors (no host sync)."""
        adv, valid = mb["advantages"], mb.get("valids")
        if valid is None:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        else:
            mine = adv[valid > 0]
            adv = (adv - mine.mean()) / (mine.std() + 1e-8) * valid if mine.numel() > 1 else adv * 0.0
        mb = {**mb, "advantages": adv}
        rows = mb["actions"].shape[0]
        step = max(1, self.micro_batch // self.recurrence) if self.micro_batch > 0 else rows
        if step >= rows and valid is None:  # one pass: no weights
            losses = self._minibatch_losses(model, mb, hyper)
            self.manual_backward(losses["loss/total"])
            return {k: v.detach() for k, v in losses.items()}
        # with several policies a micro-batch may hold none of this one's transitions (the host reads its share)
        total = float(valid.sum()) if valid is not None else float(rows)
        names, sums = None, None
        for start in range(0, rows, step):
            part = {k: v[start : start + step] for k, v in mb.items()}
            share = float(part["valids"].sum()) if valid is not None else float(part["actions"].shape[0])
            if share == 0:
                continue
            weight = share / total
            losses = self._minibatch_losses(model, part, hyper)
            self.manual_backward(losses["loss/total"] * weight)
            values = torch.stack([v.detach() for v in losses.values()]) * weight
            names, sums = names or list(losses), values if sums is None else sums + values
        return dict(zip(names, sums.unbind())) if names else {}

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
            out = model.evaluate(obs, mb["actions"], mb.get("rnn_states"), mb["dones"], with_distribution=need_dist)
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

    def _adapt_lr(self, opt, kl: float) -> None:
        a, group = self.algo, opt.param_groups[0]
        if kl > 2.0 * a.lr_schedule_kl_threshold:
            group["lr"] = max(group["lr"] / 1.5, a.lr_adaptive_min)
        elif kl < 0.5 * a.lr_schedule_kl_threshold:
            group["lr"] = min(group["lr"] * 1.5, a.lr_adaptive_max)

    def _decay_lr(self, opt, env_steps: int, learning_rate: float) -> None:
        frac = max(0.0, 1.0 - env_steps / float(self.settings.train_for_env_steps))
        opt.param_groups[0]["lr"] = learning_rate * frac

    # -- statistics and checkpoints ------------------------------------------------------------
    def avg_return(self):
        return float(np.mean(self.episode_returns)) if self.episode_returns else None

    def avg_length(self):
        return float(np.mean(self.episode_lengths)) if self.episode_lengths else None

    def _agent_episodes(self, agent: int) -> deque:
        """The last `stats_avg` (return, length) of one agent of multi-agent envs; the windows
        are made on first use (single-agent runs have none)."""
        windows = self.__dict__.setdefault("agent_episodes", {})
        if agent not in windows:
            windows[agent] = deque(maxlen=self.settings.stats_avg)
        return windows[agent]

    def avg_agent_stats(self) -> Dict[int, Dict[str, float]]:
        """{agent: {"return": average, "length": average}} for multi-agent envs, else {}."""
        windows = sorted(self.__dict__.get("agent_episodes", {}).items())
        return {a: dict(zip(("return", "length"), np.mean(w, axis=0).tolist())) for a, w in windows}

    def weights_finite(self) -> bool:
        return all(bool(torch.isfinite(t).all()) for t in self.state_dict().values() if t.is_floating_point())

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if not self.weights_finite():  # never replace a good checkpoint with a poisoned one
            raise NonFiniteTraining("the learner's weights are not finite: no checkpoint written")
        checkpoint["sf_hydra"] = {
            "policy_version": self.policy_version, "env_steps": self.env_steps, "train_seconds": self.train_seconds,
            "episode_returns": list(self.episode_returns), "episode_lengths": list(self.episode_lengths),
            "episodes_total": self.episodes_total, "policies": [s.state() for s in self.stats],
            "hyperparams": [dict(h) for h in self.hyperparams],
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint["sf_hydra"]
        self.env_steps, self.train_seconds = state["env_steps"], state["train_seconds"]
        self.episodes_total = state["episodes_total"]
        self.episode_returns.extend(state["episode_returns"])
        self.episode_lengths.extend(state["episode_lengths"])
        for k, saved in enumerate(state.get("hyperparams", [])):  # the optimizers' state holds them too
            self.hyperparams[k].update(saved)
        if "policies" in state:
            for stats, saved in zip(self.stats, state["policies"]):
                stats.restore(saved)
        else:  # saved before several policies: one policy, its model under `model.`
            self.stats[0].restore({"version": state["policy_version"], "env_steps": state["env_steps"],
                                   "episode_returns": state["episode_returns"],
                                   "episode_lengths": state["episode_lengths"],
                                   "episodes_total": state["episodes_total"]})
            weights = checkpoint["state_dict"]
            for key in [k for k in weights if k.startswith("model.")]:
                weights["policies.0." + key[len("model."):]] = weights.pop(key)


# The flags of torch.optim's Adam-family groups that choose an implementation of the same update, not the update.
KERNEL_FLAGS = ("fused", "foreach")


def fused_if_default(opt: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """`opt` rebuilt with `fused=True` when it is a torch.optim.Adam or AdamW of one parameter group left at the
    default implementation (fused and foreach unset) that the fused kernel takes (not differentiable; floating
    parameters on a device the kernel supports); otherwise `opt` itself. Invariant: the same update (the same
    formula, one kernel instead of a loop of small ops per parameter: float rounding may differ in the last bit).
    Measured for the CartPole MLP (~9k parameters, one CPU thread): an Adam step 203 us on the default
    (per-parameter) path, 171 us with foreach, 57 us fused."""
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
    for group in opt.param_groups:
        group["lr"] = hyper["learning_rate"]
        if "betas" in group:
            group["betas"] = (hyper["adam_beta1"], hyper["adam_beta2"])
        if "eps" in group:
            group["eps"] = hyper["adam_eps"]


def worker_shares(seconds: Dict[str, float]) -> Dict[str, float]:
    """Where the rollout workers' time went since the last batch, as fractions."""
    total = sum(seconds.values())
    return {f"workers/{k}_fraction": v / total for k, v in seconds.items()} if total > 0 else {}
