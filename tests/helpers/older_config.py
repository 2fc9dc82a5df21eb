"""A trained run folder as an older sf_hydra would have saved it: a copy whose config.yaml lacks the keys the
schema gained since (sf_hydra.config.saved migrates such a config where it is read)."""

import shutil
from pathlib import Path
from typing import Sequence

from omegaconf import OmegaConf

# Schema keys such a config lacks, each read by the code that loads, plays, pushes or pulls a run.
ADDED_SINCE = ("algo.num_policies", "algo.policy_assignment", "algo.async_rl", "model.action_head_init_gain",
               "model.actor_critic_share_weights", "env.pixel_format", "env.episode_counter", "logger.with_wandb",
               "seed", "eval")


def saved_without(run_dir: Path, copy: Path, keys: Sequence[str] = ADDED_SINCE) -> Path:
    """`run_dir` copied to `copy`, its config.yaml without `keys` (dotted; a group's name drops the group)."""
    shutil.copytree(run_dir, copy)
    saved = OmegaConf.load(copy / "config.yaml")
    for key in keys:
        parent, _, leaf = key.rpartition(".")
        del (OmegaConf.select(saved, parent) if parent else saved)[leaf]
    (copy / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    return copy
