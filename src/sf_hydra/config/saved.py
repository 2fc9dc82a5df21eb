"""A run's saved config.yaml as today's code reads it.

A run folder's `config.yaml` holds every key of the schema its sf_hydra had. A key added to the schema since is
absent from the configs of older runs; each place that reads a saved config (the resume, Policy.load and enjoy,
the Hub's push and pull) migrates it once, here, so that the code reads every schema key by attribute and states
no default of its own: the key takes the schema's default, or, where the key's default changed what such a run
did, the value the run behaved as (BEHAVED_AS_BEFORE_THE_KEY). Keys the schema no longer has stay as saved,
under a plain mapping (env.kwargs, a part's arguments) nothing is added, and a default that interpolates other
keys (algo.optimizer, the composed config's resolvers) is left out."""

from __future__ import annotations

import copy
import dataclasses

from omegaconf import DictConfig, OmegaConf, open_dict

from sf_hydra.config.assignment import BEFORE_THE_KEY as ASSIGNMENT_BEFORE_THE_KEY
from sf_hydra.config.schema import EnvConfig, TrainConfig
from sf_hydra.config.store import env_schemas

# Keys added since some runs were saved whose default changes what such a run did: a run saved without the key
# resumes with the value it behaved as (its default the other value only for runs that started with it).
BEHAVED_AS_BEFORE_THE_KEY = {"algo.policy_assignment": ASSIGNMENT_BEFORE_THE_KEY}


def schema_defaults(family) -> DictConfig:
    """The schema's config with its defaults: TrainConfig, its env node of `family`'s schema (EnvConfig for a
    family without one, or none named)."""
    schema = OmegaConf.structured(TrainConfig)
    schema.env = OmegaConf.structured(env_schemas().get(family, EnvConfig))
    return schema


def with_schema_defaults(saved: DictConfig) -> DictConfig:
    """A copy of the saved config `saved` holding every schema key it lacks: BEHAVED_AS_BEFORE_THE_KEY's value
    where the key has one, else the schema's default (the env's by the saved run's family)."""
    out = copy.deepcopy(saved)
    _fill(out, schema_defaults(OmegaConf.select(saved, "env.family")), "")
    return out


def _fill(node: DictConfig, schema: DictConfig, prefix: str) -> None:
    """Adds to `node` each key of the typed `schema` node it lacks; goes down the schema's typed groups."""
    defaults = OmegaConf.to_container(schema, resolve=False, enum_to_str=True)
    for key in schema.keys():
        full = f"{prefix}{key}"
        if _typed(schema, key) and isinstance(node.get(key), DictConfig):
            _fill(node[key], schema[key], f"{full}.")
        elif key not in node.keys() and not OmegaConf.is_missing(schema, key) and "${" not in str(defaults[key]):
            with open_dict(node):  # (a key without a default, env.id, or one that reads other keys: left out)
                node[key] = BEHAVED_AS_BEFORE_THE_KEY.get(full, defaults[key])


def _typed(schema: DictConfig, key: str) -> bool:
    """Whether `schema[key]` is a group of the schema (a dataclass), not a plain mapping."""
    return dataclasses.is_dataclass(OmegaConf.get_type(schema, key))
