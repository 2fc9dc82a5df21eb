"""The episode statistics a run keeps per policy, by the names `save_best_metric` takes.

The learner keeps, for each trained policy, a window of its last `logger.stats_avg` episodes
(`PolicyStats` in learner/ppo_learner.py): their returns and lengths, and with an opponent
pool (`selfplay.pool_size > 0`) the outcomes of its games against snapshots, and the
statistics the env reports at an episode's end (`env.episode_stats`, e.g. Doom's FRAGCOUNT;
envs/episode_info.py EPISODE_STATS). Those are the
statistics a best checkpoint can maximize (the highest value is the best, as in Sample
Factory). The names are known from the config alone, so a name the run never reports is
refused before any process starts. Light on purpose: no torch, no learner import.
"""

from __future__ import annotations

import math
from typing import List, Optional

from sf_hydra.config.errors import ConfigError

# Sample Factory's names, then the TensorBoard tags of the same values.
RETURN = ("reward", "true_objective", "episode/return")  # the average return
LENGTH = ("len", "episode/length")  # the average length (agent steps)
OUTCOMES = tuple(f"selfplay/vs_pool_{r}_rate" for r in ("win", "draw", "loss"))  # games against the pool


def reported_metrics(cfg) -> List[str]:
    """The names a run with config `cfg` reports per policy."""
    pool = (cfg.get("selfplay") or {}).get("pool_size", 0) or 0
    env_stats = tuple((cfg.get("env") or {}).get("episode_stats", None) or ())
    return list(RETURN + LENGTH + (OUTCOMES if pool > 0 else ()) + env_stats)


def check_metric(cfg, key: str = "save_best_metric") -> None:
    """ConfigError naming `key` when its value is not a statistic this run reports."""
    name = cfg.get(key)
    known = reported_metrics(cfg)
    if name in known:
        return
    why = ""
    if name in OUTCOMES:
        why = " (the selfplay rates exist only with an opponent pool: selfplay.pool_size > 0)"
    raise ConfigError(key, name, f"an episode statistic this run reports per policy: {', '.join(known)}{why}")


def metric_value(stats, name: str) -> Optional[float]:
    """The value of statistic `name` in one policy's window (a PolicyStats); None while it has none."""
    if name in RETURN:
        value = stats.avg_return()
    elif name in LENGTH:
        value = stats.avg_length()
    elif name in OUTCOMES:
        value = stats.outcome_rates().get(name)
    else:
        value = stats.avg_extra().get(name)  # a statistic the env reports
    return None if value is None or not math.isfinite(value) else float(value)
