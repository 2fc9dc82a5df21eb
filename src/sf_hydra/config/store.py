"""Registers the schema dataclasses with Hydra's ConfigStore (call before composing)."""

import importlib
import importlib.util
import os
import pkgutil
from dataclasses import is_dataclass

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from sf_hydra.config.choices import optimizer_target
from sf_hydra.config.schema import EnjoyConfig, EnvConfig, TrainConfig
from sf_hydra.config.sweep_folders import register_resolvers

ENVS_PACKAGE = "sf_hydra.envs"


def env_schemas() -> dict:
    """`<folder>` -> the EnvConfig subclass defined in `sf_hydra/envs/<folder>/schema.py`, for
    every folder there that has one: found on disk, so a family folder with a schema is typed
    without a list to edit. Schema modules are leaves (dataclasses; they import
    sf_hydra.config.schema and nothing of a family's code), imported here on call, never when
    sf_hydra.config is imported."""
    folders = importlib.util.find_spec(ENVS_PACKAGE).submodule_search_locations
    schemas = {}
    for folder in pkgutil.iter_modules(folders):
        if not folder.ispkg or not os.path.isfile(os.path.join(folder.module_finder.path, folder.name, "schema.py")):
            continue
        module = importlib.import_module(f"{ENVS_PACKAGE}.{folder.name}.schema")
        nodes = [v for v in vars(module).values() if isinstance(v, type) and is_dataclass(v)
                 and issubclass(v, EnvConfig) and v.__module__ == module.__name__]
        if len(nodes) != 1:
            names = [n.__name__ for n in nodes]
            raise TypeError(f"{module.__name__} must define exactly one EnvConfig subclass (found {names})")
        schemas[folder.name] = nodes[0]
    return schemas


def greater_than(a, b) -> bool:
    """The `sf_gt` resolver: `${sf_gt:a,b}` is a > b."""
    return a > b


def any_of(*values) -> bool:
    """The `sf_or` resolver: `${sf_or:a,b,...}` is true when any value is."""
    return any(bool(v) for v in values)


def register_configs() -> None:
    """`train_schema` types the whole tree; `schema/env/<family>` types one family's env node,
    and `schema/env/base` the keys every family understands (a family without a schema of its
    own, e.g. gym or a user's: its own settings go under `env.kwargs`)."""
    register_resolvers()
    if not OmegaConf.has_resolver("sf_optimizer"):  # algo.optimizer's default _target_ (choices.OPTIMIZER_TARGETS)
        OmegaConf.register_new_resolver("sf_optimizer", optimizer_target)
    if not OmegaConf.has_resolver("sf_gt"):  # conf/callbacks: `_enabled_: ${sf_gt:${selfplay.pool_size},0}`
        OmegaConf.register_new_resolver("sf_gt", greater_than)
    if not OmegaConf.has_resolver("sf_or"):  # conf/callbacks: the evaluation's and the opponent pool's `_enabled_`
        OmegaConf.register_new_resolver("sf_or", any_of)
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(name="enjoy_schema", node=EnjoyConfig)
    cs.store(group="schema/env", name="base", node=EnvConfig)
    for family, node in env_schemas().items():
        cs.store(group="schema/env", name=family, node=node)
    _register_launchers(cs)


def _register_launchers(cs: ConfigStore) -> None:
    """Our launcher and sweeper nodes, when their plugins' extras (slurm, optuna) are installed."""
    from hydra_plugins.sf_hydra_plugins import optuna_defaults  # plugins load at registering, not with sf_hydra.config

    optuna_defaults.register()
    try:
        from hydra_plugins.sf_hydra_plugins.local_parallel import LocalParallelConf  # ~0.2 s, as above; optional extra
    except ImportError:
        return
    cs.store(group="hydra/launcher", name="local_parallel_schema", node=LocalParallelConf)
