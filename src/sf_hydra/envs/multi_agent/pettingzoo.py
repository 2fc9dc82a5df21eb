"""PettingZoo Parallel API envs as multi-agent envs of our protocol (protocol.py).

The agent list is fixed to the env's `possible_agents`, in that order. An agent that is
done before the others has its done (and last reward) reported once, then stays inactive
(`is_active=False`, reward 0, its actions not sent to the env) until every agent is done;
then the env is reset and every agent starts its new episode active. All agents must share
one observation space and one action space. Float64 Box observations are handed out as
float32 (half the buffer memory); `flatten_obs=True` flattens them to one vector (an MLP
encoder's input).

From a config (the gym family's module:Id form):

    env:
      id: sf_hydra.envs.multi_agent.pettingzoo:PettingZoo-v0
      kwargs: {module: pettingzoo.butterfly.knights_archers_zombies_v11, env_kwargs: {...}}
"""

from __future__ import annotations

import importlib

import gymnasium as gym
import numpy as np


class PettingZooParallelEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, parallel_env, flatten_obs: bool = False):
        self.env = parallel_env
        self.agents = list(parallel_env.possible_agents)
        self.num_agents = len(self.agents)
        self.action_space = self._shared_space(parallel_env.action_space, "action")
        self._raw_obs_space = self._shared_space(parallel_env.observation_space, "observation")
        self.flatten_obs = flatten_obs
        self.observation_space = self._converted_obs_space(self._raw_obs_space)
        self._last_obs = [np.zeros(self.observation_space.shape, self.observation_space.dtype)] * self.num_agents
        self._done = np.zeros(self.num_agents, dtype=bool)  # agents whose episode is over, waiting for the others

    def _shared_space(self, space_of, kind: str) -> gym.Space:
        first = space_of(self.agents[0])
        for agent in self.agents[1:]:
            if space_of(agent) != first:
                raise ValueError(f"PettingZoo agents {self.agents[0]!r} and {agent!r} have different {kind} spaces "
                                 f"({first} vs {space_of(agent)}): the sampler needs one space for all agents")
        return first

    def _converted_obs_space(self, space: gym.Space) -> gym.Space:
        if not isinstance(space, gym.spaces.Box):
            return space
        dtype = np.float32 if space.dtype == np.float64 else space.dtype
        low, high = space.low.astype(dtype), space.high.astype(dtype)
        if self.flatten_obs:
            low, high = low.reshape(-1), high.reshape(-1)
        return gym.spaces.Box(low, high, dtype=dtype)

    def _convert_obs(self, obs):
        if not isinstance(self.observation_space, gym.spaces.Box):
            return obs
        obs = np.asarray(obs, dtype=self.observation_space.dtype)
        return obs.reshape(-1) if self.flatten_obs else obs

    def _obs_list(self, obs: dict) -> list:
        """Agents the env gave no observation (done ones) keep their last."""
        for i, agent in enumerate(self.agents):
            if agent in obs:
                self._last_obs[i] = self._convert_obs(obs[agent])
        return list(self._last_obs)

    def _infos(self, infos: dict, active: np.ndarray) -> list:
        return [{**infos.get(agent, {}), "is_active": bool(a)} for agent, a in zip(self.agents, active)]

    def reset(self, *, seed=None, options=None):
        obs, infos = self.env.reset(seed=seed, options=options)
        self._done[:] = False
        return self._obs_list(obs), self._infos(infos, ~self._done)

    def step(self, actions):
        live = set(self.env.agents)
        obs, rewards, terminated, truncated, infos = self.env.step(
            {agent: action for agent, action in zip(self.agents, actions) if agent in live})
        rewards_out = [float(rewards.get(agent, 0.0)) if agent in live else 0.0 for agent in self.agents]
        term_out = [bool(terminated.get(agent, False)) and agent in live for agent in self.agents]
        trunc_out = [bool(truncated.get(agent, False)) and agent in live for agent in self.agents]
        self._done |= np.logical_or(term_out, trunc_out)
        obs_out = self._obs_list(obs)
        if self._done.all() or not self.env.agents:
            obs, infos = self.env.reset()
            self._done[:] = False
            obs_out = self._obs_list(obs)
        return obs_out, rewards_out, term_out, trunc_out, self._infos(infos, ~self._done)

    def close(self) -> None:
        self.env.close()


def make_pettingzoo_env(module: str, env_kwargs: dict | None = None, flatten_obs: bool = False,
                        render_mode=None) -> PettingZooParallelEnv:
    """`module` names a PettingZoo env module with a `parallel_env(**env_kwargs)` function."""
    try:
        env_module = importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"env.kwargs.module={module!r} cannot be imported ({e}): name a PettingZoo env module, "
                         "e.g. pettingzoo.butterfly.knights_archers_zombies_v11 "
                         "(pip install 'pettingzoo[butterfly]')") from None
    if not hasattr(env_module, "parallel_env"):
        raise ValueError(f"env.kwargs.module={module!r} has no parallel_env(): not a PettingZoo env module")
    return PettingZooParallelEnv(env_module.parallel_env(**dict(env_kwargs or {})), flatten_obs=flatten_obs)


gym.register("PettingZoo-v0", entry_point=make_pettingzoo_env, disable_env_checker=True, order_enforce=False)
