"""Env groups: what the agent-rows worker steps. A group is one env object that moves
several trajectory rows per step: the agents of a multi-agent env, or the envs of a
vectorized env. Both answer `step(actions[A]) -> StepBatch` with arrays, so the worker
never loops over agents in Python.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional

import gymnasium as gym
import numpy as np

from sf_hydra.core.spaces import to_env_action
from sf_hydra.envs.episode_info import GAME_CONTINUES, SHAPING_UNITS, episode_stats, game_continues
from sf_hydra.envs.multi_agent.protocol import is_active, num_agents
from sf_hydra.sampler.vector_envs import VectorEnv


class StepBatch(NamedTuple):
    obs: Dict[str, np.ndarray]  # [A, ...] per observation key: what each agent acts on next
    rewards: np.ndarray  # float32 [A]
    terminated: np.ndarray  # bool [A]
    truncated: np.ndarray  # bool [A]
    active: np.ndarray  # bool [A]: the transition starting from `obs` is trained on
    frames: int  # agent steps the env really simulated (reset-only steps excluded)
    game_continues: np.ndarray  # bool [A]: a done here ends a life, not the game (envs/episode_info.py)
    episode_stats: Optional[list] = None  # [A] a finished game's statistics (dict) or None; None: none at all
    shaping_units: Optional[np.ndarray] = None  # [A, 2V] envs/episode_info.py SHAPING_UNITS; None: not reported


def obs_rows(obs) -> Dict[str, np.ndarray]:
    """Per-agent observations (a list, a batched array or a dict of either) as {key: [A, ...]}."""
    if isinstance(obs, dict):
        return {k: np.asarray(v) for k, v in obs.items()}
    if isinstance(obs, np.ndarray):
        return {"obs": obs}
    if obs and isinstance(obs[0], dict):
        return {k: np.stack([o[k] for o in obs]) for k in obs[0]}
    return {"obs": np.stack(obs)}


def shaping_units(infos) -> Optional[np.ndarray]:
    """[A, 2V] the agents' SHAPING_UNITS (zeros for an agent whose info has none); None when
    no agent reports any."""
    found = [info.get(SHAPING_UNITS) if info else None for info in infos]
    first = next((u for u in found if u is not None), None)
    if first is None:
        return None
    zeros = np.zeros(len(first))
    return np.stack([zeros if u is None else np.asarray(u, dtype=np.float64) for u in found])


def random_steps(env, steps: int, seed, first_obs):
    """`steps` random actions (the action space's sampler, seeded with `seed`) in a single-agent
    env, resetting it at each episode's end; returns the observation to act on next."""
    obs = first_obs
    if steps <= 0:
        return obs
    env.action_space.seed(seed)
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    return obs


class ProtocolEnvGroup:
    """One env following `sf_hydra.envs.multi_agent.protocol`."""

    def __init__(self, env):
        self.env = env
        self.num_agents = num_agents(env)
        self.observation_space, self.action_space = env.observation_space, env.action_space
        self._all = np.ones(self.num_agents, dtype=bool)
        self._none = np.zeros(self.num_agents, dtype=bool)

    def _active(self, infos) -> np.ndarray:
        flags = [is_active(info) for info in infos]
        return self._all if all(flags) else np.asarray(flags, dtype=bool)

    def _game_continues(self, infos) -> np.ndarray:
        flags = [game_continues(info) for info in infos]
        return np.asarray(flags, dtype=bool) if any(flags) else self._none

    @staticmethod
    def _episode_stats(infos):
        stats = [episode_stats(info) for info in infos]
        return stats if any(s is not None for s in stats) else None

    def reset(self, seed=None):
        obs, infos = self.env.reset(seed=seed)
        return obs_rows(obs), self._active(infos)

    def random_steps(self, steps: int, seed):
        """hardware.decorrelate_envs_on_one_worker: `steps` random actions for every agent (the
        env restarts agents itself); returns what `reset` does, for the last step."""
        self.action_space.seed(seed)
        for _ in range(steps):
            obs, _, _, _, infos = self.env.step([self.action_space.sample() for _ in range(self.num_agents)])
        return obs_rows(obs), self._active(infos)

    def step(self, actions: np.ndarray) -> StepBatch:
        obs, rewards, terminated, truncated, infos = self.env.step(
            [to_env_action(self.action_space, a) for a in actions])
        return StepBatch(obs_rows(obs), np.asarray(rewards, dtype=np.float32), np.asarray(terminated, dtype=bool),
                         np.asarray(truncated, dtype=bool), self._active(infos), self.num_agents,
                         self._game_continues(infos), self._episode_stats(infos), shaping_units(infos))

    def close(self) -> None:
        self.env.close()


class SingleEnvGroup:
    """A single-agent gymnasium env as a group of one row, reset as soon as it is done."""

    num_agents = 1

    def __init__(self, env: gym.Env):
        self.env = env
        self.observation_space, self.action_space = env.observation_space, env.action_space
        self._active = np.ones(1, dtype=bool)

    def reset(self, seed=None):
        obs, _ = self.env.reset(seed=seed)
        return obs_rows([obs]), self._active

    def random_steps(self, steps: int, seed):
        """hardware.decorrelate_envs_on_one_worker: `steps` random actions, reset at episode ends."""
        return obs_rows([random_steps(self.env, steps, seed, None)]), self._active

    def step(self, actions: np.ndarray) -> StepBatch:
        obs, reward, terminated, truncated, info = self.env.step(to_env_action(self.action_space, actions[0]))
        if terminated or truncated:
            obs, _ = self.env.reset()
        return StepBatch(obs_rows([obs]), np.array([reward], np.float32), np.array([terminated]), np.array([truncated]),
                         self._active, 1, np.array([game_continues(info)]),
                         [episode_stats(info)] if episode_stats(info) is not None else None, shaping_units([info]))

    def close(self) -> None:
        self.env.close()


def batch_actions(space: gym.Space, actions: np.ndarray):
    """Action rows [A, ...] as a vector env takes them."""
    if isinstance(space, gym.spaces.Box):
        actions = actions.reshape(len(actions), *space.shape)
        return np.clip(actions, space.low, space.high).astype(space.dtype, copy=False)
    if isinstance(space, gym.spaces.Tuple):
        return tuple(actions[:, i] for i in range(actions.shape[1]))
    return actions


def vector_game_continues(infos: dict, resets_next_step: bool, num_envs: int) -> np.ndarray:
    """GAME_CONTINUES of each sub-env from a vector env's infos (gymnasium's dict of arrays,
    with `_key` masks): with "next step" autoreset in the step's own infos, with "same step"
    autoreset in their `final_info` (the step's infos are then those of the new episode)."""
    source = infos if resets_next_step else infos.get("final_info") or {}
    if GAME_CONTINUES not in source:
        return np.zeros(num_envs, dtype=bool)
    return (np.asarray(source[GAME_CONTINUES], dtype=bool)
            & np.asarray(source.get(f"_{GAME_CONTINUES}", True), dtype=bool))


def vector_shaping_units(infos: dict, num_envs: int) -> Optional[np.ndarray]:
    """[num_envs, 2V] SHAPING_UNITS from a vector env's infos (zeros where a sub-env has none).
    With "same step" autoreset a sub-env's done step has its units in `final_info` (its
    step's infos are those of the new episode's reset)."""
    if not isinstance(infos, dict):
        return None
    found = None
    for source in (infos, infos.get("final_info") or {}):
        if SHAPING_UNITS not in source:
            continue
        units = np.asarray(source[SHAPING_UNITS], dtype=np.float64).reshape(num_envs, -1)
        present = np.asarray(source.get(f"_{SHAPING_UNITS}", True), dtype=bool).reshape(-1, 1)
        units = units * present
        found = units if found is None else found + units
    return found


class VectorEnvGroup:
    """A gymnasium vector env or an EnvPool env: each sub-env is one row. With "next step"
    autoreset, the step after a done only resets that env: it is an inactive transition."""

    def __init__(self, vector: VectorEnv):
        self.env, self.resets_next_step = vector.env, vector.resets_next_step
        self.observation_space, self.action_space = vector.observation_space, vector.action_space
        self.num_agents = int(self.env.num_envs)
        self._resetting = np.zeros(self.num_agents, dtype=bool)  # envs whose next step only resets them
        self._all = np.ones(self.num_agents, dtype=bool)

    def reset(self, seed=None):
        obs, _ = self.env.reset(seed=seed)
        self._resetting[:] = False
        return obs_rows(obs), self._all

    def step(self, actions: np.ndarray) -> StepBatch:
        obs, rewards, terminated, truncated, infos = self.env.step(batch_actions(self.action_space, actions))
        terminated, truncated = np.asarray(terminated, dtype=bool), np.asarray(truncated, dtype=bool)
        frames = self.num_agents
        active = self._all
        if self.resets_next_step:
            frames -= int(self._resetting.sum())
            self._resetting = terminated | truncated
            active = ~self._resetting
        return StepBatch(obs_rows(obs), np.asarray(rewards, dtype=np.float32), terminated, truncated, active, frames,
                         vector_game_continues(infos, self.resets_next_step, self.num_agents),
                         shaping_units=vector_shaping_units(infos, self.num_agents))

    def close(self) -> None:
        self.env.close()
