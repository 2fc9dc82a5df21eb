"""What the sampler must know of an env before any worker starts: its per-agent spaces
and, for a multi-agent env, its agent count (buffers are allocated per agent). Read from
one env built here, or from a file (hardware.use_env_info_cache)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
from pathlib import Path
from typing import NamedTuple, Optional

import gymnasium as gym
from omegaconf import DictConfig, OmegaConf

from sf_hydra.envs import make_env
from sf_hydra.envs.multi_agent.protocol import is_multi_agent, num_agents

log = logging.getLogger(__name__)


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


CACHE_FOLDER = ".env_info_cache"


def env_info_cache_file(cfg) -> Path:
    """hardware.use_env_info_cache: <train_dir>/.env_info_cache/<hash of the resolved env node>.pkl.
    Any change of the env node (id, frameskip, kwargs, ...) is another file; a change of the env's
    code that changes its spaces is not seen: delete the folder then."""
    node = OmegaConf.to_container(cfg.env, resolve=True, enum_to_str=True) if isinstance(cfg.env, DictConfig) \
        else dict(cfg.env)
    key = hashlib.sha256(json.dumps(node, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return Path(cfg.train_dir).absolute() / CACHE_FOLDER / f"{key}.pkl"


def env_info(cfg) -> EnvInfo:
    """describe_env(cfg.env), or with hardware.use_env_info_cache the cached answer: start-up
    then builds no env (the workers build theirs). The cache is written after a build."""
    if not cfg.hardware.use_env_info_cache:
        log.info("building env %s to read its spaces", cfg.env.name)
        return describe_env(cfg.env, seed=cfg.seed)
    path = env_info_cache_file(cfg)
    if path.is_file():
        try:
            with path.open("rb") as f:
                info = EnvInfo(*pickle.load(f))
            log.info("env spaces read from %s (hardware.use_env_info_cache)", path)
            return info
        except Exception as e:  # a cache of another version or a truncated file: build the env again
            log.warning("env info cache %s unreadable (%s): building the env", path, e)
    log.info("building env %s to read its spaces (then cached in %s)", cfg.env.name, path)
    info = describe_env(cfg.env, seed=cfg.seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    with tmp.open("wb") as f:
        pickle.dump(tuple(info), f)
    os.replace(tmp, path)  # atomic: a concurrent run reads the old file or the new one
    return info
