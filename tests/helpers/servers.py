"""An inference server in the test's own process, over its own stores and one shared channel: the
server tests and the CUDA-graph tests drive `InferenceServer.serve` directly and compare its answers
with the policy acting on the same inputs."""

from __future__ import annotations

import multiprocess
import torch

from sf_hydra.core.trajectory import model_trajectory_spec
from sf_hydra.models import build_model, model_recipe
from sf_hydra.plan import worker_settings
from sf_hydra.sampler.env_info import describe_env
from sf_hydra.sampler.inference_server import InferenceChannel, InferenceServer
from sf_hydra.sampler.policy_store import PolicyStore

SERVER = ("hardware.inference=server", "hardware.worker_num_splits=2", "hardware.num_envs_per_worker=4")
GRU = ("model.use_rnn=true", "model.rnn_size=16", "algo.recurrence=8", "algo.rollout=8", "algo.batch_size=64")


def server_and_channel(cfg, rows: int, policies: int = 1):
    """An in-process server over `policies` stores holding different weights, and one channel of `rows` rows
    filled with random observations and RNN states. Returns (server, channel, models)."""
    info = describe_env(cfg.env, seed=0)
    torch.manual_seed(0)
    recipe = model_recipe(cfg)
    models = [build_model(recipe, info.observation_space, info.action_space).eval() for _ in range(policies)]
    stores = [PolicyStore(m) for m in models]
    spec = model_trajectory_spec(info.observation_space, info.action_space, models[0], policies)
    channel = InferenceChannel(0, 0, rows, info.observation_space, spec, models[0].rnn_state_size,
                               multiprocess.Pipe(duplex=True))
    for t in channel.obs.values():
        t.copy_(torch.randn(t.shape) if t.is_floating_point() else torch.randint(0, 255, t.shape).to(t.dtype))
    channel.rnn.copy_(torch.randn(channel.rnn.shape))
    server = InferenceServer(worker_settings(cfg, info.num_agents, recipe, learner_bf16=False), info.observation_space,
                             info.action_space, stores, {0: channel})
    return server, channel, models
