"""Registers the schema dataclasses with Hydra's ConfigStore (call before composing)."""

from hydra.core.config_store import ConfigStore

from sf_hydra.config.schema import DoomEnvConfig, GymEnvConfig, TrainConfig

ENV_SCHEMAS = {"gym": GymEnvConfig, "doom": DoomEnvConfig}


def register_configs() -> None:
    """`train_schema` types the whole tree; `schema/env/<family>` types one family's env node."""
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    for family, node in ENV_SCHEMAS.items():
        cs.store(group="schema/env", name=family, node=node)
