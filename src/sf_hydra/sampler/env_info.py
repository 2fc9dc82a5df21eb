"""What the sampler must know of an env before any worker starts: its per-agent spaces
and, for a multi-agent env, its agent count (buffers are allocated per agent). Read from
one env built here, or from a JSON file in the user's cache folder (hardware.use_env_info_cache: never a
pickle)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
from importlib.metadata import version
from pathlib import Path
from typing import List, NamedTuple, Optional

import gymnasium as gym
from omegaconf import DictConfig, OmegaConf

from sf_hydra.core.clock import said_while_slow
from sf_hydra.core.files import write_atomically
from sf_hydra.core.spaces import space_from_json, space_to_json
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


CACHE_ENV = "SF_HYDRA_CACHE"  # where sf_hydra keeps what it can compute again (default: the user's cache folder)
CACHE_FOLDER = "env_info"


def cache_root() -> Path:
    """$SF_HYDRA_CACHE, else $XDG_CACHE_HOME/sf_hydra, else ~/.cache/sf_hydra: a machine's cache, outside every run
    folder and train_dir (which hold only runs)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base and os.path.isabs(base) else Path.home() / ".cache") / "sf_hydra"


def _env_node(cfg) -> dict:
    """The resolved env node as JSON reads it back (what a cache file is keyed by and records)."""
    node = OmegaConf.to_container(cfg.env, resolve=True, enum_to_str=True) if isinstance(cfg.env, DictConfig) \
        else dict(cfg.env)
    return json.loads(json.dumps(node, sort_keys=True, default=str))


def _module_files(module: str) -> List[Path]:
    """The source files of `module`'s package folder (a family's spaces come from its whole package: Doom's
    family.py builds env.py's env), or of the module itself when it is a top-level file."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return []
    origin = Path(spec.origin)
    return sorted(origin.parent.glob("*.py")) if "." in module else [origin]


def _code_stamp(cfg) -> list:
    """What the env's spaces are computed by, as (file, mtime, size): the env family's package and, for a
    registered gymnasium id, its entry point's module; and the versions of gymnasium and sf_hydra. An edit of
    a user's env code is then another cache file, not a stale one."""
    modules = [str(OmegaConf.select(cfg, "env.factory._target_", default="")).rpartition(".")[0]]
    env_id = OmegaConf.select(cfg, "env.id", default=None)
    if isinstance(env_id, str) and env_id.split(":")[-1] in gym.registry:
        entry = gym.registry[env_id.split(":")[-1]].entry_point
        modules.append(entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", ""))
    files = sorted({f for m in modules if m for f in _module_files(m)})
    stamps = []
    for f in files:
        try:
            stat = f.stat()
        except OSError:
            continue
        stamps.append([str(f), stat.st_mtime_ns, stat.st_size])
    return [gym.__version__, version("sf_hydra"), stamps]


def env_info_cache_file(cfg) -> Path:
    """hardware.use_env_info_cache: <cache_root>/env_info/<hash>.json, the hash of the resolved env node and of the
    env code's files (_code_stamp). Any change of the env node (id, frameskip, kwargs, ...) or of the family's files
    is another file. (A `.pkl` beside it would be an older version's cache: never read.)"""
    key = hashlib.sha256(json.dumps([_env_node(cfg), _code_stamp(cfg)], sort_keys=True).encode()).hexdigest()[:20]
    return cache_root() / CACHE_FOLDER / f"{key}.json"


def _read_cache(path: Path, node: dict) -> EnvInfo:
    """The EnvInfo a cache file describes; raises (ValueError, KeyError, ...) for one that does not parse, was
    written for another env node, or describes no valid spaces: a file in train_dir may be anyone's."""
    d = json.loads(path.read_bytes())
    if not isinstance(d, dict) or d.get("env") != node:
        raise ValueError("written for another env node")
    agents = d["num_agents"]
    if agents is not None and (type(agents) is not int or agents < 1):
        raise ValueError(f"num_agents={agents!r} is not a count of agents")
    return EnvInfo(space_from_json(d["observation"]), space_from_json(d["action"]), agents)


def _write_cache(path: Path, node: dict, info: EnvInfo) -> None:
    """Caches `info` as JSON (atomically: a concurrent run reads the old file or the new one); spaces JSON
    cannot describe (core/spaces.py space_to_json) are not cached, said once per start."""
    try:
        text = json.dumps({"env": node, "observation": space_to_json(info.observation_space),
                           "action": space_to_json(info.action_space), "num_agents": info.num_agents}, indent=1)
    except TypeError as e:
        log.info("env spaces not cached (hardware.use_env_info_cache): %s", e)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: Path(tmp).write_text(text))


def env_info(cfg) -> EnvInfo:
    """describe_env(cfg.env), or with hardware.use_env_info_cache the cached answer: start-up
    then builds no env (the workers build theirs). The cache is written after a build; a cache file
    that cannot be read as this env node's spaces is built anew, never a crash."""
    if not cfg.hardware.use_env_info_cache:
        log.info("building env %s to read its spaces", cfg.env.name)
        with said_while_slow(f"building env {cfg.env.name} to read its spaces", log):
            return describe_env(cfg.env, seed=cfg.seed)
    path, node = env_info_cache_file(cfg), _env_node(cfg)
    if path.is_file():
        try:
            info = _read_cache(path, node)
            log.info("env spaces read from %s (hardware.use_env_info_cache)", path)
            return info
        except Exception as e:  # noqa: BLE001 (truncated, edited, another version's: build the env again)
            log.warning("env info cache %s unreadable (%s: %s): building the env", path, type(e).__name__,
                        str(e).splitlines()[0] if str(e) else "")
    log.info("building env %s to read its spaces (then cached in %s)", cfg.env.name, path)
    with said_while_slow(f"building env {cfg.env.name} to read its spaces", log):
        info = describe_env(cfg.env, seed=cfg.seed)
    _write_cache(path, node, info)
    return info
