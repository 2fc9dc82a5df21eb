"""Multi-agent envs: the protocol the sampler understands, a toy env, a PettingZoo adapter."""

from sf_hydra.envs.multi_agent.protocol import INACTIVE_KEY, MultiAgentEnv, is_active, is_multi_agent, num_agents

__all__ = ["INACTIVE_KEY", "MultiAgentEnv", "is_active", "is_multi_agent", "num_agents"]
