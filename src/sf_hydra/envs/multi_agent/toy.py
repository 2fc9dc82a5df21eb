"""A small multi-agent env of our own that exercises the whole protocol in tests.

Every agent sees a cue (one of `num_actions`) and earns 1 for choosing it, 0 otherwise: a
learnable signal (random play earns 1/num_actions per active step, a trained policy 1).
Agents differ on purpose:
- agent i's episodes last `episode_length + i * length_step` steps, and each agent is
  reset on its own when its episode ends;
- agent i > 0 is inactive (`is_active=False`, reward 0, its actions ignored) during the
  last i steps of every `inactive_period + i` steps of its episode, so with the defaults
  agent 2's episode (14 steps) ends while it is inactive.

The observation tells a test what it needs to check the sampler: the cue (one-hot), an
"inactive" flag, the agent's index (one-hot) and the episode step (raw, not scaled).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class MultiAgentToyEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, num_agents: int = 3, num_actions: int = 3, episode_length: int = 8, length_step: int = 3,
                 inactive_period: int = 5, render_mode=None):
        self.num_agents, self.num_actions = num_agents, num_actions
        self.lengths = [episode_length + i * length_step for i in range(num_agents)]
        self.periods = [inactive_period + i for i in range(num_agents)]
        self.observation_space = gym.spaces.Box(0.0, float(max(self.lengths)), (num_actions + 1 + num_agents + 1,),
                                                np.float32)
        self.action_space = gym.spaces.Discrete(num_actions)
        self.render_mode = render_mode
        self.t = np.zeros(num_agents, dtype=np.int64)
        self.cues = np.zeros(num_agents, dtype=np.int64)

    # -- the rules --------------------------------------------------------------------------
    def inactive_at(self, agent: int, t: int) -> bool:
        """Agent i sits out the last i steps of every period of its episode."""
        return agent > 0 and t % self.periods[agent] >= self.periods[agent] - agent

    def active_steps(self, agent: int) -> int:
        """Active steps in one episode of `agent` (its best possible return)."""
        return sum(not self.inactive_at(agent, t) for t in range(self.lengths[agent]))

    # -- observations -----------------------------------------------------------------------
    def _obs(self, agent: int) -> np.ndarray:
        obs = np.zeros(self.observation_space.shape, dtype=np.float32)
        obs[self.cues[agent]] = 1.0
        obs[self.num_actions] = float(self.inactive_at(agent, int(self.t[agent])))
        obs[self.num_actions + 1 + agent] = 1.0
        obs[-1] = float(self.t[agent])
        return obs

    def _info(self, agent: int) -> dict:
        return {"is_active": not self.inactive_at(agent, int(self.t[agent]))}

    def _start_episode(self, agent: int) -> None:
        self.t[agent] = 0
        self.cues[agent] = self.np_random.integers(self.num_actions)

    # -- the protocol -----------------------------------------------------------------------
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        for agent in range(self.num_agents):
            self._start_episode(agent)
        return [self._obs(a) for a in range(self.num_agents)], [self._info(a) for a in range(self.num_agents)]

    def step(self, actions):
        n = self.num_agents
        rewards, terminated = [0.0] * n, [False] * n
        for agent, action in enumerate(actions):
            if not self.inactive_at(agent, int(self.t[agent])):
                rewards[agent] = float(int(action) == self.cues[agent])
            self.t[agent] += 1
            self.cues[agent] = self.np_random.integers(self.num_actions)
            if self.t[agent] >= self.lengths[agent]:
                terminated[agent] = True
                self._start_episode(agent)
        return [self._obs(a) for a in range(n)], rewards, terminated, [False] * n, [self._info(a) for a in range(n)]


# `env.id: sf_hydra.envs.multi_agent.toy:MultiAgentToy-v0` (the gym family's module:Id form). No
# env checker, order enforcing or time limit: those wrappers expect one agent's values.
gym.register("MultiAgentToy-v0", entry_point=MultiAgentToyEnv, disable_env_checker=True, order_enforce=False)
