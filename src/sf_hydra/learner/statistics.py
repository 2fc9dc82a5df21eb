"""The learner's statistics: each trained policy's counters and episode windows (PolicyStats), and the
run's own (LearnerStatistics, an object the PPO learner holds): what a batch's meta adds to them, the averages
that progress lines, summaries and PBT read, and what a checkpoint keeps of them."""

from __future__ import annotations

from collections import deque
from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import torch

from sf_hydra.core.game_results import Game, pool_outcome
from sf_hydra.core.metric_names import DRAW, LOSS, TRUE_OBJECTIVE, WIN, outcome_rate
from sf_hydra.learner import ddp


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


class RankEpisode(NamedTuple):
    """An episode in another learner rank's batch, as it arrived (the sampler's Episode's fields, checked)."""

    ret: float
    length: int
    agent: Optional[int]
    policy: int
    extra: Optional[Dict[str, float]]
    true_ret: Optional[float]


def _meta_to_send(run: dict) -> dict:
    """A rank's share of a batch's meta (_run_meta) as JSON data: numbers as Python's, episodes and games as
    lists of their fields."""
    return {**{k: int(v) for k, v in run.items() if k not in ("episodes", "games", "worker_seconds",
                                                               "wait_seconds", "lag")},
            "episodes": [[float(e.ret), int(e.length), None if e.agent is None else int(e.agent), int(e.policy),
                          None if e.extra is None else {str(k): float(v) for k, v in e.extra.items()},
                          None if e.true_ret is None else float(e.true_ret)] for e in run["episodes"]],
            "games": [[[int(p) for p in g.policies], [int(x) for x in g.generations], [float(r) for r in g.returns]]
                      for g in run["games"]],
            "worker_seconds": {str(k): float(v) for k, v in run["worker_seconds"].items()},
            "wait_seconds": float(run["wait_seconds"]),
            "lag": None if run["lag"] is None else [float(x) for x in run["lag"]]}


def _meta_received(sent: dict) -> dict:
    """A rank's share as _meta_to_send sent it, its episodes and games rebuilt; a field of the wrong kind
    raises (TypeError, ValueError, KeyError): what arrives from another machine is read as data only."""
    def optional(kind, value):
        return None if value is None else kind(value)

    episodes = [RankEpisode(float(ret), int(length), optional(int, agent), int(policy),
                            None if extra is None else {str(k): float(v) for k, v in extra.items()},
                            optional(float, true_ret))
                for ret, length, agent, policy, extra, true_ret in sent["episodes"]]
    games = [Game(tuple(int(p) for p in policies), tuple(int(x) for x in generations), tuple(float(r) for r in returns))
             for policies, generations, returns in sent["games"]]
    lag = sent["lag"]
    return {**sent, "episodes": episodes, "games": games,
            "worker_seconds": {str(k): float(v) for k, v in sent["worker_seconds"].items()},
            "wait_seconds": float(sent["wait_seconds"]),
            "lag": None if lag is None else (float(lag[0]), float(lag[1]), float(lag[2]), int(lag[3]))}


class LearnerStatistics:
    """The run's counters and windows, and each trained policy's (`stats`). The learner writes them: a batch's
    meta (`record`), its own update counters (`nonfinite_skipped`, `last_metrics`, each policy's `version` and
    `metrics`); StopConditions adds the training time. Counters marked "this session" start at zero on a
    resume; the others are saved in checkpoints (`state`)."""

    def __init__(self, num_policies: int, stats_avg: int, shaped: bool = False):
        """shaped: the env declares reward shaping (each policy's true return is then reported beside its
        shaped one)."""
        self.num_policies, self.stats_avg, self.shaped = num_policies, stats_avg, shaped
        self.stats = [PolicyStats(stats_avg) for _ in range(num_policies)]
        self.env_steps = 0  # frames of the whole run (every policy's, snapshots' too)
        self.train_seconds = 0.0
        self.episode_returns: deque = deque(maxlen=stats_avg)  # every trained policy's episodes
        self.episode_lengths: deque = deque(maxlen=stats_avg)
        self.episodes_total = 0
        self.agent_episodes: Dict[int, deque] = {}  # multi-agent envs: agent -> its last (return, length)
        self.dropped_total = 0  # trajectories older than max_policy_lag, this session
        # Multi-agent games of two or more players (sf_hydra/core/game_results.py), the newest last: the league
        # (learner/league.py) takes them as they come; the oldest go first if nothing takes them.
        self.games: deque = deque(maxlen=10_000)
        self.last_metrics: Dict[str, float] = {}  # the run's own (not per policy)
        self.nonfinite_skipped = 0  # learner updates skipped for a non-finite loss or gradient, this session
        self.nonfinite_env_values = 0  # env values the workers replaced by 0 (env.nonfinite=replace), this session
        self.env_restarts = 0  # envs the workers re-created after a crash or hang, this session

    @property
    def policy_versions(self) -> List[int]:
        return [s.version for s in self.stats]

    def _run_meta(self, meta: dict, lag: Optional[Tuple[float, float, float, int]]) -> dict:
        """What the run counts of a batch's meta: its frames, episodes, games and sampler counters, summed
        (episodes and games listed) over every learner rank's batch of this step in rank order (learner/ddp.py),
        with the rollout workers' seconds per activity summed, the longest wait for data, and the policy `lag`
        moments (min, sum, max, count) merged; with one rank, this rank's. Every rank gets the same: what the
        run logs is every rank's, not rank 0's alone."""
        keys = ("frames", "episodes", "games", "nonfinite_replaced", "env_restarts", "dropped_trajectories")
        mine = {**{k: meta.get(k, 0) for k in keys}, "worker_seconds": dict(meta["worker_seconds"]),
                "wait_seconds": float(meta["wait_seconds"]), "lag": lag}
        if ddp.world_size() == 1:
            return mine
        ranks = [_meta_received(r) for r in ddp.gather(_meta_to_send(mine))]
        listed = ("episodes", "games")
        run = {k: [x for r in ranks for x in r[k]] if k in listed else sum(int(r[k]) for r in ranks) for k in keys}
        seconds: Dict[str, float] = {}
        for r in ranks:
            for name, value in r["worker_seconds"].items():
                seconds[name] = seconds.get(name, 0.0) + value
        lags = [r["lag"] for r in ranks if r["lag"] is not None and r["lag"][3] > 0]
        merged = (min(x[0] for x in lags), sum(x[1] for x in lags), max(x[2] for x in lags),
                  sum(x[3] for x in lags)) if lags else lag
        return {**run, "worker_seconds": seconds, "wait_seconds": max(r["wait_seconds"] for r in ranks),
                "lag": merged}

    def record(self, meta: dict, lag: Optional[Tuple[float, float, float, int]] = None) -> dict:
        """Counts the batch's meta (every rank's: _run_meta) into the run's counters and windows; returns it."""
        run = self._run_meta(meta, lag)
        self.env_steps += int(run["frames"])
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
        return run

    def lag_moments(self, policy: int, versions: torch.Tensor, valid: Optional[torch.Tensor]
                    ) -> Tuple[float, float, float, int]:
        """(min, sum, max, count) of how many versions policy `policy`'s transitions lag its learner: `versions`
        [B, T], the versions that acted a batch; `valid` [B, T] where the policy acted (None: everywhere)."""
        lag = (self.stats[policy].version - versions).float()
        if valid is not None:
            lag = lag[valid > 0]
        if lag.numel() == 0:
            return (0.0, 0.0, 0.0, 0)
        return (lag.min().item(), lag.sum().item(), lag.max().item(), lag.numel())

    def record_update(self, policy: int, metrics: Dict[str, float], run: dict, lr: float,
                      epochs_per_second: float) -> None:
        """A learner iteration of `policy`: its version up by one; its metrics are the update's (`metrics`), the
        lag of the run's transitions (every rank's: `record`'s `run`), its learning rate `lr`, the run's samples
        trained per second (`epochs_per_second`: epochs over this rank's training time; the ranks train in step,
        every minibatch's gradients averaged across them) and, with reward shaping, its true return beside
        episode/return, which is shaped."""
        stats = self.stats[policy]
        stats.version += 1
        lag_min, lag_sum, lag_max, samples = run["lag"]
        stats.metrics = {
            **metrics,
            "policy_lag/min": lag_min, "policy_lag/avg": lag_sum / max(samples, 1), "policy_lag/max": lag_max,
            "learner/lr": lr,
            "learner/policy_version": float(stats.version),
            "learner/samples_per_sec": samples * epochs_per_second,
        }
        if self.shaped and (true_return := stats.avg_true_return()) is not None:
            stats.metrics["episode/true_return"] = true_return

    def set_run_metrics(self, run: dict, counters: bool = True) -> None:
        """`last_metrics` of a batch's run figures (`record`'s): the wait for data and the rollout workers'
        shares of their time; with `counters`, the run's counters of skipped updates, env faults and dropped
        trajectories too."""
        self.last_metrics = {"learner/wait_for_data_sec": float(run["wait_seconds"]),
                             **worker_shares(run["worker_seconds"])}
        if counters:
            self.last_metrics.update({
                "learner/nonfinite_updates_skipped": float(self.nonfinite_skipped),
                "env/nonfinite_values": float(self.nonfinite_env_values),
                "env/restarts": float(self.env_restarts),
                "learner/dropped_trajectories": float(run["dropped_trajectories"]),
                "learner/dropped_trajectories_total": float(self.dropped_total),
            })

    def avg_return(self):
        return float(np.mean(self.episode_returns)) if self.episode_returns else None

    def avg_length(self):
        return float(np.mean(self.episode_lengths)) if self.episode_lengths else None

    def _agent_episodes(self, agent: int) -> deque:
        """The last `stats_avg` (return, length) of one agent of multi-agent envs; the windows
        are made on first use (single-agent runs have none)."""
        if agent not in self.agent_episodes:
            self.agent_episodes[agent] = deque(maxlen=self.stats_avg)
        return self.agent_episodes[agent]

    def avg_agent_stats(self) -> Dict[int, Dict[str, float]]:
        """{agent: {"return": average, "length": average}} for multi-agent envs, else {}."""
        windows = sorted(self.agent_episodes.items())
        return {a: dict(zip(("return", "length"), np.mean(w, axis=0).tolist())) for a, w in windows}

    def objective(self, policy: int, name: str):
        """Policy `policy`'s average of `name` over its last episodes (what PBT ranks by): for `true_objective`,
        PolicyStats.true_objective (the env's own, else the unshaped return), else a statistic the
        env reports; None before any episode."""
        stats = self.stats[policy]
        return stats.true_objective() if name == TRUE_OBJECTIVE else stats.avg_extra().get(name)

    def state(self) -> dict:
        """What a checkpoint keeps of the statistics (its `sf_hydra` part, the hyperparameters aside)."""
        return {"policy_version": sum(self.policy_versions), "env_steps": self.env_steps,
                "train_seconds": self.train_seconds,
                "episode_returns": list(self.episode_returns), "episode_lengths": list(self.episode_lengths),
                "episodes_total": self.episodes_total, "policies": [s.state() for s in self.stats]}

    def restore(self, state: dict) -> None:
        """The statistics of a checkpoint's `sf_hydra` part (`state`, or an older one's)."""
        self.env_steps, self.train_seconds = state["env_steps"], state["train_seconds"]
        self.episodes_total = state["episodes_total"]
        self.episode_returns.extend(state["episode_returns"])
        self.episode_lengths.extend(state["episode_lengths"])
        if "policies" in state:
            for stats, saved in zip(self.stats, state["policies"]):
                stats.restore(saved)
        else:  # saved before several policies: one policy
            self.stats[0].restore({"version": state["policy_version"], "env_steps": state["env_steps"],
                                   "episode_returns": state["episode_returns"],
                                   "episode_lengths": state["episode_lengths"],
                                   "episodes_total": state["episodes_total"]})


def worker_shares(seconds: Dict[str, float]) -> Dict[str, float]:
    """Where the rollout workers' time went since the last batch, as fractions."""
    total = sum(seconds.values())
    return {f"workers/{k}_fraction": v / total for k, v in seconds.items()} if total > 0 else {}
