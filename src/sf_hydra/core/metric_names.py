"""The names of the statistics a run keeps per policy, written once: the sampler records
self-play outcomes by them, the learner logs and ranks by them, and the config keys that
name a statistic (`save_best_metric`, `pbt.target_objective`) are checked against them.

The learner keeps, for each trained policy, a window of its last `logger.stats_avg` episodes
(`PolicyStats` in learner/ppo_learner.py): their returns and lengths, with an opponent pool
(`selfplay.pool_size > 0`) the outcomes of its games against snapshots, and the statistics
the env reports at an episode's end (`env.episode_stats`, e.g. Doom's FRAGCOUNT;
envs/episode_info.py EPISODE_STATS). A best checkpoint maximizes one of them (the highest
value is the best, as in Sample Factory); PBT ranks by the return or an env statistic.

Invariants: a leaf module (no import of sf_hydra, no third-party import), so every layer
may import it; the names are known from the config alone, so a name a run never reports is
refused before any process starts (config/metrics.py)."""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

# How a self-play game against the opponent pool ended for the trained policy (policy_mapping.py).
WIN, DRAW, LOSS = "win", "draw", "loss"
RESULTS = (WIN, DRAW, LOSS)


def outcome_rate(result: str) -> str:
    """The name (and TensorBoard tag) of the fraction of games against the pool that ended in `result`."""
    return f"selfplay/vs_pool_{result}_rate"


OUTCOME_RATES = tuple(outcome_rate(r) for r in RESULTS)  # games against the pool: win, draw, loss rates

# PBT's ranking (Sample Factory's name): the env's own `true_objective` episode statistic if it
# reports one, else the average true return: without a policy's own reward-shaping bonus.
TRUE_OBJECTIVE = "true_objective"
# Sample Factory's names, then the TensorBoard tags of the same values.
RETURN = ("reward", TRUE_OBJECTIVE, "episode/return")  # the average return
LENGTH = ("len", "episode/length")  # the average length (agent steps)

# What evaluation during training (eval.*, sf_hydra.evaluation) reports per policy, after each evaluation:
# the mean return and length of its games.
EVAL_RETURN, EVAL_LENGTH = "eval/return", "eval/length"
EVAL_METRICS = (EVAL_RETURN, EVAL_LENGTH)


def is_eval_metric(name: str) -> bool:
    return str(name).startswith("eval/")


EVAL_ON = "eval.every_env_steps or eval.every_sec > 0"  # evaluation during training is on, in words


def eval_on(ev) -> bool:
    """Whether the run evaluates during training (EVAL_ON), from its `eval` group (the EvalConfig, its node, or
    an object with its two schedule fields): the one definition every module asks."""
    return ev.every_env_steps > 0 or ev.every_sec > 0


BEST_METRIC_KEY = "save_best_metric"
OBJECTIVE_KEY = "pbt.target_objective"


def metric_choices(cfg, key: str, env_stats: Optional[Sequence[str]] = None) -> List[str]:
    """What config key `key` (BEST_METRIC_KEY or OBJECTIVE_KEY) may name in a run with config `cfg`:
    for a best checkpoint, every statistic the run reports per policy (return, length, the outcome
    rates with an opponent pool, the env's statistics, and with evaluation on EVAL_METRICS); for
    PBT's ranking, the return as TRUE_OBJECTIVE, an env statistic, or with evaluation on
    EVAL_RETURN. `env_stats`: the statistics the env family declares (envs.episode_stats); None
    reads `env.episode_stats` from `cfg` (the config alone)."""
    if env_stats is None:
        env_stats = cfg.env.get("episode_stats") or ()  # a key of the families that declare statistics
    env_stats = tuple(env_stats)
    if key == OBJECTIVE_KEY:
        return [TRUE_OBJECTIVE, *env_stats, *((EVAL_RETURN,) if eval_on(cfg.eval) else ())]
    if key != BEST_METRIC_KEY:
        raise KeyError(f"{key!r} names no statistic (known: {BEST_METRIC_KEY}, {OBJECTIVE_KEY})")
    evaluated = EVAL_METRICS if eval_on(cfg.eval) else ()
    return list(RETURN + LENGTH + (OUTCOME_RATES if cfg.selfplay.pool_size > 0 else ()) + env_stats + evaluated)


def metric_value(stats, name: str) -> Optional[float]:
    """The value of statistic `name` in one policy's window (a PolicyStats); None while it has none."""
    if name == TRUE_OBJECTIVE:
        value = stats.true_objective()
    elif name in RETURN:
        value = stats.avg_return()
    elif name in LENGTH:
        value = stats.avg_length()
    elif name in OUTCOME_RATES:
        value = stats.outcome_rates().get(name)
    else:
        value = stats.avg_extra().get(name)  # a statistic the env reports
    return None if value is None or not math.isfinite(value) else float(value)
