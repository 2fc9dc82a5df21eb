"""What the sampler must know of an env before any worker starts: its per-agent spaces
and, for a multi-agent env, its agent count (buffers are allocated per agent)."""

from __future__ import annotations

from typing import NamedTuple, Optional

import gymnasium as gym

from sf_hydra.envs import make_env
from sf_hydra.envs.multi_agent.protocol import is_multi_agent, num_agents


class EnvInfo(NamedTuple):
    observation_space: gym.Space
    action_space: gym.Space
    num_agents: Optional[int]  # None: a single-agent gymnasium env


def describe_env(env_cfg, seed=None) -> EnvInfo:
    """Builds one env here only to read what it is; workers build their own."""
    env = make_env(env_cfg, seed=seed)
    try:
        return EnvInfo(env.observation_space, env.action_space, num_agents(env) if is_multi_agent(env) else None)
    finally:
        env.close()
