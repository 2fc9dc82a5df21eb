"""Env families: what a family offers, and how the `env` config node names its family.

A family is a class deriving from `EnvFamily`, named in the family's config file
(`conf/env_family/<family>.yaml`, or a user's own yaml) by the dotted path
`env.factory._target_`. `make_env` instantiates it (once per process and node) and asks it for
an env; `check_env` asks it to validate the node before any process starts. Nothing is
registered and no list of families exists: a family is one folder (its code and schema) plus
one config file.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import gymnasium as gym
from omegaconf import DictConfig, OmegaConf

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.targets import build
from sf_hydra.envs.multi_agent.protocol import is_multi_agent
from sf_hydra.envs.wrappers import ChannelsFirst, EpisodeCounter


class VectorEnv(NamedTuple):
    """A family's vectorized env for `hardware.batched_sampling=true` (see sampler/vector_envs.py)."""

    env: object  # gymnasium.vector.VectorEnv or an EnvPool env
    observation_space: gym.Space  # of one env
    action_space: gym.Space
    resets_next_step: bool  # the step after a done ignores the action and returns the new episode's first obs


class EnvFamily:
    """Derive from it and name the class in `env.factory._target_`. Its constructor gets the
    other keys of the `env.factory` node (none for the built-in families); every method gets
    the whole `env` node. The object holds no per-env state: one serves every env of a process."""

    # Vector backends besides `auto` and `sync` that `make_vector` builds (e.g. "envpool").
    vector_backends: Tuple[str, ...] = ()
    # What env.pixel_format may say of its envs' images; a family that always emits CHW says ("CHW",).
    pixel_formats: Tuple[str, ...] = ("CHW", "HWC")

    def make(self, env_cfg, seed: Optional[int] = None, render_mode: Optional[str] = None) -> gym.Env:
        """One env, reset with `seed` when it is not None."""
        raise NotImplementedError

    def validate(self, env_cfg) -> None:
        """Raises ConfigError (key, value, what is allowed) for a bad `env` node; runs before any
        process starts. The default accepts every node."""

    def episode_stats(self, env_cfg) -> Tuple[str, ...]:
        """The statistics its envs report at an episode's end (keys of
        `info["episode_extra_stats"]`): what `pbt.target_objective` may name besides the return.
        The default declares none."""
        return ()

    def reward_shaping(self, env_cfg) -> Dict[str, Tuple[float, float]]:
        """{name: (reward per unit up, per unit down)}: the shaped quantities whose units its envs
        report each step in `info["reward_shaping_units"]` (envs/episode_info.py), in this order;
        PBT perturbs these weights per policy. The default declares none."""
        return {}

    def check_vector_backend(self, env_cfg, backend: str) -> None:
        """Raises ConfigError when `backend` (one of `vector_backends`) cannot build this env."""

    def make_vector(self, env_cfg, num_envs: int, seed, backend: str) -> Optional[VectorEnv]:
        """The family's own vector env for `backend` (`auto` or one of `vector_backends`), not
        reset yet; None lets the sampler step `num_envs` envs of `make` in gymnasium's SyncVectorEnv."""
        return None

    def concurrent_make(self, env_cfg) -> bool:
        """Whether several `make` calls for this node may run at once on threads of one process: True
        where an env's start-up mostly waits on something outside Python (ViZDoom's engine is a process
        of its own). The default says no: `make_envs` then creates one env after another."""
        return False


_FAMILIES: Dict[str, EnvFamily] = {}  # per process: the env.factory node (as yaml) -> its family


def _as_node(env_cfg) -> DictConfig:
    return env_cfg if isinstance(env_cfg, DictConfig) else OmegaConf.create(env_cfg)


def env_family(env_cfg) -> EnvFamily:
    """The family object that `env_cfg.factory` names (ConfigError for a bad node)."""
    env_cfg = _as_node(env_cfg)
    node = env_cfg.get("factory")
    key = OmegaConf.to_yaml(node) if isinstance(node, DictConfig) else repr(node)
    if key not in _FAMILIES:
        family = build("env.factory", node)
        if not isinstance(family, EnvFamily):
            raise ConfigError("env.factory._target_", node["_target_"],
                              f"a subclass of {EnvFamily.__module__}.EnvFamily (it built a {type(family).__name__})")
        _FAMILIES[key] = family
    return _FAMILIES[key]


def make_env(env_cfg: Any, seed: Optional[int] = None, render_mode: Optional[str] = None) -> gym.Env:
    """One env of the family `env_cfg.factory` names. `env_cfg` is the `env` node: a DictConfig,
    or the plain dict a worker process re-creates its config from."""
    env_cfg = _as_node(env_cfg)
    env = env_family(env_cfg).make(env_cfg, seed=seed, render_mode=render_mode)
    return _wrapped(env, env_cfg)


def make_envs(env_cfg: Any, seeds: Sequence[Optional[int]]) -> List[gym.Env]:
    """One env per seed, in order. For a family that allows it (EnvFamily.concurrent_make) they start
    together, on a thread each; if any fails, the others are closed and the first failure (in seed
    order) is raised, as creating them one by one would."""
    env_cfg = _as_node(env_cfg)
    if len(seeds) < 2 or not env_family(env_cfg).concurrent_make(env_cfg):
        return [make_env(env_cfg, seed=seed) for seed in seeds]
    with ThreadPoolExecutor(max_workers=len(seeds), thread_name_prefix="make_env") as pool:
        futures = [pool.submit(make_env, env_cfg, seed) for seed in seeds]
    failures = [f.exception() for f in futures if f.exception() is not None]
    if failures:
        for f in futures:
            if f.exception() is None:
                try:
                    f.result().close()
                except Exception:  # noqa: BLE001 - the first failure is the one to report
                    pass
        raise failures[0]
    return [f.result() for f in futures]


def _wrapped(env, env_cfg):
    """The wrappers the `env` node's common keys ask for (single-agent envs; a multi-agent env
    with them is refused before any process starts: sampler.check_sampling_options)."""
    hwc, counter = str(env_cfg.pixel_format) == "HWC", env_cfg.episode_counter
    if not (hwc or counter) or is_multi_agent(env):
        return env
    if hwc:
        env = ChannelsFirst(env)
    return EpisodeCounter(env) if counter else env


def episode_stats(env_cfg) -> Tuple[str, ...]:
    """The end-of-episode statistics the env's family declares (EnvFamily.episode_stats)."""
    env_cfg = _as_node(env_cfg)
    counted = ("episode_number",) if env_cfg.episode_counter else ()
    return tuple(env_family(env_cfg).episode_stats(env_cfg)) + counted


def reward_shaping(env_cfg) -> Dict[str, Tuple[float, float]]:
    """The reward shaping the env's family declares (EnvFamily.reward_shaping)."""
    env_cfg = _as_node(env_cfg)
    return {str(k): (float(v[0]), float(v[1])) for k, v in env_family(env_cfg).reward_shaping(env_cfg).items()}


def check_env(env_cfg) -> None:
    """The family's own validation of the `env` node (before any process starts)."""
    env_cfg = _as_node(env_cfg)
    family = env_family(env_cfg)
    pixel_format = str(env_cfg.pixel_format)
    if pixel_format not in family.pixel_formats:
        raise ConfigError("env.pixel_format", pixel_format,
                          f"{' or '.join(family.pixel_formats)} (the {env_cfg.get('family')!r} family's images)")
    family.validate(env_cfg)
