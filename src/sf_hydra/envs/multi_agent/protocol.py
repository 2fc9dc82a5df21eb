"""The multi-agent env protocol the sampler understands.

A multi-agent env is any object with:

- `num_agents: int`: a fixed number of agents (a plain gymnasium env has no such attribute
  and counts as one agent, stepped through the single-agent code path).
- `observation_space`, `action_space`: the spaces of ONE agent (all agents share them).
- `reset(seed=None) -> (obs_list, info_list)`: one entry per agent.
- `step(actions_list) -> (obs_list, reward_list, terminated_list, truncated_list, info_list)`:
  one entry per agent; `actions_list[i]` is agent i's action.
- `close()`.

Auto-reset, per agent: when `terminated[i] or truncated[i]`, agent i's episode is over and
the env has already started its next one: `obs_list[i]` is the first observation of the
new episode (never the last of the old one). `info_list[i]` of that step may carry
`episode_extra_stats` (a dict of floats) for the finished episode (averaged per policy like
the return; `pbt.target_objective` may name one), and `game_continues=True` when
the done ends a part of the agent's game that goes on (its statistics then go on too, see
sf_hydra/envs/episode_info.py). An env that cannot
restart one agent alone (e.g. it restarts when every agent is done) keeps the agent
inactive (below) until it can; the next *active* observation after a done is then the
first of the new episode.

Inactive agents: `info_list[i]["is_active"] = False` in what `reset` or `step` returns
marks agent i as inactive from this observation on: its next transition (the action
taken from this observation, the reward and done that follow) is not trained on. A key
that is absent means active. Example: an agent that dies waiting to respawn returns
`is_active=False` from the step in which it died (that step itself, with its death
penalty, is still trained on) and every step after, until the step that returns its
respawn observation with `is_active=True`. Rewards given to an inactive agent are counted
in its episode statistics but not trained on (give them at an active step instead);
a done that happens while an agent is inactive ends its last active transition's episode
(no bootstrapping into the next episode).

From a config: any env family's factory may return such an env. With the gym family's
"module:Id" form, register the id with `disable_env_checker=True, order_enforce=False` and
leave `env.max_episode_steps` unset: gymnasium's checker and time limit expect one agent's
values (see toy.py and conf/env/gym/multi_agent_toy.yaml).
"""

from __future__ import annotations

from typing import Any, List, Protocol, Tuple, runtime_checkable

INACTIVE_KEY = "is_active"


@runtime_checkable
class MultiAgentEnv(Protocol):
    num_agents: int
    observation_space: Any
    action_space: Any

    def reset(self, seed=None) -> Tuple[List[Any], List[dict]]: ...

    def step(self, actions: List[Any]) -> Tuple[List[Any], List[float], List[bool], List[bool], List[dict]]: ...

    def close(self) -> None: ...


def is_multi_agent(env) -> bool:
    """True when the env follows this protocol (has `num_agents`, even if it is 1). Looks
    through gymnasium wrappers, which no longer forward attributes."""
    return _num_agents_attr(env) is not None


def num_agents(env) -> int:
    """The env's agent count; 1 for a plain single-agent gymnasium env."""
    count = _num_agents_attr(env)
    return 1 if count is None else count


def _num_agents_attr(env):
    getter = getattr(env, "get_wrapper_attr", None)
    try:
        count = getter("num_agents") if getter is not None else getattr(env, "num_agents")
    except AttributeError:
        return None
    return int(count)


def is_active(info) -> bool:
    """Absent key (or no info at all) means active."""
    return bool(info.get(INACTIVE_KEY, True)) if info else True
