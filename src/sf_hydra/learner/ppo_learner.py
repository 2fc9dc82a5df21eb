"""The PPO learner as a LightningModule with manual optimization: asynchronous PPO (APPO,
`algo=appo`: trajectories may lag the policy by up to `max_policy_lag` versions) and
synchronous PPO (`algo=ppo`: each batch is what the current policy collected) differ only
on the sampling side, so one learner trains both.

It sees batches of whole trajectories and returns losses; it knows nothing of processes.
One `training_step` is one learner iteration: `num_epochs` passes over the batch in
minibatches of `batch_size` transitions, then the policy version goes up by one.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Dict

import lightning as L
import numpy as np
import torch

from sf_hydra.learner.advantages import gae
from sf_hydra.learner.losses import approx_kl, entropy_loss, policy_loss, value_loss
from sf_hydra.models import build_model
from sf_hydra.trajectory import model_trajectory_spec, obs_fields_of


class PPOLearner(L.LightningModule):
    def __init__(self, cfg, obs_space, action_space):
        super().__init__()
        self.automatic_optimization = False
        self.cfg, self.algo = cfg, cfg.algo
        self.model = build_model(cfg, obs_space, action_space)
        self.spec = model_trajectory_spec(obs_space, action_space, self.model)
        self.recurrence = resolved_recurrence(cfg)
        self.micro_batch = resolved_micro_batch(cfg, obs_space)
        # Counters that survive a resume (saved in on_save_checkpoint).
        self.policy_version = 0
        self.env_steps = 0
        self.train_seconds = 0.0
        self.episode_returns: deque = deque(maxlen=cfg.logger.stats_avg)
        self.episode_lengths: deque = deque(maxlen=cfg.logger.stats_avg)
        self.episodes_total = 0
        self.dropped_total = 0  # trajectories older than max_policy_lag, this session
        self.last_metrics: Dict[str, float] = {}

    def configure_optimizers(self):
        """`algo.optimizer` (a `_partial_` node, default Adam reading algo.learning_rate/adam_*)
        called with the model's parameters."""
        from sf_hydra.targets import build

        return build("algo.optimizer", self.algo.optimizer, self.model.parameters())

    # -- data preparation --------------------------------------------------------------------
    def _record_meta(self, meta: dict) -> None:
        self.env_steps += int(meta["frames"])
        for ret, length, *agent in meta["episodes"]:  # agent: its index in a multi-agent env
            self.episode_returns.append(ret)
            self.episode_lengths.append(length)
            if agent:
                self._agent_episodes(agent[0]).append((ret, length))
        self.episodes_total += len(meta["episodes"])
        self.dropped_total += int(meta["dropped_trajectories"])

    @torch.no_grad()
    def _advantages_and_targets(self, batch: dict):
        """GAE in raw return units; value targets and old values in the value head's units."""
        norm = self.model.returns_norm
        values = norm.denormalize(batch["values"]) if norm is not None else batch["values"]
        rewards = batch["rewards"]
        if self.algo.value_bootstrap:  # a truncated episode would have gone on: add gamma*V(s)
            rewards = rewards + self.algo.gamma * values[:, :-1] * batch["time_outs"]
        advantages, returns = gae(rewards, values, batch["dones"], self.algo.gamma, self.algo.gae_lambda)
        if norm is not None:
            norm.update(returns)
            return advantages, norm.normalize(returns), norm.normalize(values[:, :-1])
        return advantages, returns, values[:, :-1]

    def _chunks(self, batch: dict, advantages, targets, old_values) -> dict:
        """[B, T] -> [B*T/R, R] recurrence chunks, every field of the trajectory spec by one
        rule: a bootstrap field drops its extra step (values are replaced by the learner's
        own `old_values`, `targets` and `advantages`), a chunk-start field keeps the first
        step of each chunk (the RNN state a chunk's unroll starts from)."""
        r = self.recurrence

        def split(x):
            return x.reshape(-1, r, *x.shape[2:])

        data = {}
        for field in self.spec:
            if field.bootstrap:
                continue
            chunks = split(batch[field.name])
            data[field.name] = chunks[:, 0] if field.chunk_start_only else chunks
        data.update(advantages=split(advantages), targets=split(targets), old_values=split(old_values))
        return data

    # -- the iteration -----------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        meta = batch.pop("meta")
        self._record_meta(meta)
        self.model.preprocess.update(obs_fields_of(batch))
        advantages, targets, old_values = self._advantages_and_targets(batch)
        data = self._chunks(batch, advantages, targets, old_values)
        lag = (self.policy_version - batch["policy_versions"]).float()
        t0 = time.perf_counter()
        stats = self._train_epochs(data)
        train_time = time.perf_counter() - t0
        self.policy_version += 1
        self.last_metrics = {
            **stats,
            "policy_lag/min": lag.min().item(), "policy_lag/avg": lag.mean().item(), "policy_lag/max": lag.max().item(),
            "learner/dropped_trajectories": float(meta["dropped_trajectories"]),
            "learner/dropped_trajectories_total": float(self.dropped_total),
            "learner/wait_for_data_sec": float(meta["wait_seconds"]),
            "learner/lr": self.optimizers().param_groups[0]["lr"],
            "learner/policy_version": float(self.policy_version),
            "learner/samples_per_sec": lag.numel() * self.algo.num_epochs / max(train_time, 1e-9),
            **worker_shares(meta["worker_seconds"]),
        }
        self.log("env_steps", float(self.env_steps), on_step=True, logger=False, prog_bar=False)

    def _train_epochs(self, data: dict) -> Dict[str, float]:
        opt = self.optimizers()
        n_chunks = data["actions"].shape[0]
        per_minibatch = self.algo.batch_size // self.recurrence
        sums: Dict[str, float] = {}
        count = 0
        for _ in range(self.algo.num_epochs):
            order = torch.randperm(n_chunks) if self.algo.shuffle_minibatches else torch.arange(n_chunks)
            for start in range(0, n_chunks, per_minibatch):
                idx = order[start : start + per_minibatch]
                mb = {k: v[idx] for k, v in data.items()}
                opt.zero_grad(set_to_none=True)
                losses = self._accumulate_gradients(mb)
                grad_norm = self._grad_norm()
                if self.algo.max_grad_norm > 0:
                    self.clip_gradients(opt, gradient_clip_val=self.algo.max_grad_norm, gradient_clip_algorithm="norm")
                opt.step()
                losses["learner/grad_norm"] = grad_norm
                for k, v in losses.items():
                    sums[k] = sums.get(k, 0.0) + float(v)
                count += 1
                if self.algo.lr_schedule == "kl_adaptive_minibatch":
                    self._adapt_lr(float(losses["learner/kl"]))
            if self.algo.lr_schedule == "kl_adaptive_epoch":
                self._adapt_lr(sums["learner/kl"] / count)
        if self.algo.lr_schedule == "linear_decay":
            self._decay_lr()
        return {k: v / count for k, v in sums.items()}

    def _accumulate_gradients(self, mb: dict) -> Dict[str, float]:
        """Backward over the minibatch in micro-batches of whole recurrence chunks. Every loss
        is a mean, so weighting each micro-batch by its share of the rows gives the
        minibatch's gradient and statistics exactly; advantages are normalized over the
        whole minibatch first."""
        adv = mb["advantages"]
        mb = {**mb, "advantages": (adv - adv.mean()) / (adv.std() + 1e-8)}
        rows = mb["actions"].shape[0]
        step = max(1, self.micro_batch // self.recurrence) if self.micro_batch > 0 else rows
        sums: Dict[str, float] = {}
        for start in range(0, rows, step):
            part = {k: v[start : start + step] for k, v in mb.items()}
            weight = part["actions"].shape[0] / rows
            losses = self._minibatch_losses(part)
            self.manual_backward(losses["loss/total"] * weight)
            for k, v in losses.items():
                sums[k] = sums.get(k, 0.0) + weight * float(v.detach())
        return sums

    def _minibatch_losses(self, mb: dict) -> Dict[str, torch.Tensor]:
        """The PPO losses of one (micro-)batch; its advantages are normalized already."""
        a = self.algo
        obs = obs_fields_of(mb)
        log_probs, entropy, values = self.model.evaluate(obs, mb["actions"], mb.get("rnn_states"), mb["dones"])
        adv = mb["advantages"]
        p_loss, ratio, clip_fraction = policy_loss(log_probs, mb["log_probs"], adv, a.ppo_clip_ratio)
        v_loss = value_loss(values, mb["old_values"], mb["targets"], a.ppo_clip_value)
        e_loss = entropy_loss(entropy)
        total = p_loss + a.value_loss_coeff * v_loss + a.exploration_loss_coeff * e_loss
        with torch.no_grad():
            kl = approx_kl(ratio)
        return {
            "loss/total": total, "loss/policy": p_loss.detach(), "loss/value": v_loss.detach(),
            "loss/entropy": entropy.mean().detach(), "learner/kl": kl, "learner/clip_fraction": clip_fraction,
        }

    def _grad_norm(self) -> float:
        norms = [p.grad.detach().norm() for p in self.model.parameters() if p.grad is not None]
        return torch.linalg.vector_norm(torch.stack(norms)).item() if norms else 0.0

    def _adapt_lr(self, kl: float) -> None:
        a, group = self.algo, self.optimizers().param_groups[0]
        if kl > 2.0 * a.lr_schedule_kl_threshold:
            group["lr"] = max(group["lr"] / 1.5, a.lr_adaptive_min)
        elif kl < 0.5 * a.lr_schedule_kl_threshold:
            group["lr"] = min(group["lr"] * 1.5, a.lr_adaptive_max)

    def _decay_lr(self) -> None:
        frac = max(0.0, 1.0 - self.env_steps / float(self.cfg.train_for_env_steps))
        self.optimizers().param_groups[0]["lr"] = self.algo.learning_rate * frac

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
            windows[agent] = deque(maxlen=self.cfg.logger.stats_avg)
        return windows[agent]

    def avg_agent_stats(self) -> Dict[int, Dict[str, float]]:
        """{agent: {"return": average, "length": average}} for multi-agent envs, else {}."""
        windows = sorted(self.__dict__.get("agent_episodes", {}).items())
        return {a: dict(zip(("return", "length"), np.mean(w, axis=0).tolist())) for a, w in windows}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["sf_hydra"] = {
            "policy_version": self.policy_version, "env_steps": self.env_steps, "train_seconds": self.train_seconds,
            "episode_returns": list(self.episode_returns), "episode_lengths": list(self.episode_lengths),
            "episodes_total": self.episodes_total,
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint["sf_hydra"]
        self.policy_version, self.env_steps = state["policy_version"], state["env_steps"]
        self.train_seconds, self.episodes_total = state["train_seconds"], state["episodes_total"]
        self.episode_returns.extend(state["episode_returns"])
        self.episode_lengths.extend(state["episode_lengths"])


def worker_shares(seconds: Dict[str, float]) -> Dict[str, float]:
    """Where the rollout workers' time went since the last batch, as fractions."""
    total = sum(seconds.values())
    return {f"workers/{k}_fraction": v / total for k, v in seconds.items()} if total > 0 else {}


def resolved_recurrence(cfg) -> int:
    """Sample Factory's rule: -1 means the whole rollout for RNNs, 1 for feed-forward nets."""
    if cfg.algo.recurrence == -1:
        return cfg.algo.rollout if cfg.model.use_rnn else 1
    return cfg.algo.recurrence


def resolved_micro_batch(cfg, obs_space) -> int:
    """hardware.learner_micro_batch with -1 resolved: 256 samples (rounded to whole
    recurrence chunks) for image observations on CPU, else 0 (no split)."""
    micro = cfg.hardware.learner_micro_batch
    if micro != -1:
        return micro
    from sf_hydra.spaces import obs_shapes

    has_images = any(len(shape) == 3 for shape in obs_shapes(obs_space).values())
    if not has_images or cfg.hardware.device != "cpu":
        return 0
    r = resolved_recurrence(cfg)
    return max(r, 256 // r * r)
