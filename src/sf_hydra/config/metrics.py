"""The one check of a config key that names a per-policy statistic (`save_best_metric`,
`pbt.target_objective`): its value is one of `metric_names.metric_choices`, else a ConfigError
names the key, the value and the allowed names. Light: no torch, no env family is imported."""

from __future__ import annotations

from typing import Optional, Sequence

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.metric_names import (
    BEST_METRIC_KEY,
    EVAL_ON,
    OBJECTIVE_KEY,
    OUTCOME_RATES,
    is_eval_metric,
    metric_choices,
)


def _value(cfg, key: str):
    node = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node


def check_metric(cfg, key: str = BEST_METRIC_KEY, env_stats: Optional[Sequence[str]] = None) -> None:
    """ConfigError naming `key` when its value is not a statistic `metric_choices` allows for it."""
    name = _value(cfg, key)
    allowed = metric_choices(cfg, key, env_stats)
    if name in allowed:
        return
    if key == OBJECTIVE_KEY:
        raise ConfigError(key, name, ", ".join(allowed) + " (true_objective: the average return without a "
                          "policy's own reward shaping, or the env's own true_objective statistic; the others: "
                          "statistics this env reports at an episode's end, env.episode_stats where the family has "
                          f"it; eval/return: the latest evaluation's mean return, with {EVAL_ON})")
    why = ""
    if name in OUTCOME_RATES:
        why = " (the selfplay rates exist only with an opponent pool: selfplay.pool_size > 0)"
    elif is_eval_metric(name) and not any(is_eval_metric(a) for a in allowed):
        why = f" (eval/* metrics exist only with evaluation during training: {EVAL_ON})"
    raise ConfigError(key, name, f"an episode statistic this run reports per policy: {', '.join(allowed)}{why}")
