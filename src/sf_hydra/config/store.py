"""Registers the schema dataclasses with Hydra's ConfigStore (call before composing)."""

from hydra.core.config_store import ConfigStore

from sf_hydra.config.resolvers import register_resolvers
from sf_hydra.config.schema import EnjoyConfig, EnvConfig, GymEnvConfig, TrainConfig


def env_schemas() -> dict:
    """family -> its typed env node. Each lives beside the family's code, in a module free of
    heavy imports; imported here on call, not with this module, because those modules import
    sf_hydra.config.schema, whose package imports this one (a family's schema module imported
    first would otherwise find itself half-initialized)."""
    from sf_hydra.envs.atari.schema import AtariEnvConfig
    from sf_hydra.envs.dmlab.schema import DmlabEnvConfig
    from sf_hydra.envs.doom.schema import DoomEnvConfig
    from sf_hydra.envs.mujoco.schema import MujocoEnvConfig

    return {"gym": GymEnvConfig, "doom": DoomEnvConfig, "atari": AtariEnvConfig, "mujoco": MujocoEnvConfig, "dmlab": DmlabEnvConfig}


def register_configs() -> None:
    """`train_schema` types the whole tree; `schema/env/<family>` types one family's env node."""
    register_resolvers()
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(name="enjoy_schema", node=EnjoyConfig)
    for family, node in env_schemas().items():
        cs.store(group="schema/env", name=family, node=node)
    _register_launchers(cs)


def _register_launchers(cs: ConfigStore) -> None:
    """Our launcher and sweeper nodes, when their plugins' extras (slurm, optuna) are installed."""
    from hydra_plugins.sf_hydra_plugins import optuna_defaults

    optuna_defaults.register()
    try:
        from hydra_plugins.sf_hydra_plugins.local_parallel import LocalParallelConf
    except ImportError:
        return
    cs.store(group="hydra/launcher", name="local_parallel_schema", node=LocalParallelConf)
    # A family registered from the user's own module (see the `imports` key): the keys every
    # family understands; its own settings go under env.kwargs.
    cs.store(group="schema/env", name="custom", node=EnvConfig)
