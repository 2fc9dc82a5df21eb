"""The `dmlab` family slot: its configs compose (experiments name them), and validation
refuses them with what is missing, before any process starts."""

from __future__ import annotations

import importlib.util

from sf_hydra.core.errors import ConfigError
from sf_hydra.envs.family import EnvFamily


class DmlabFamily(EnvFamily):
    """No adapter is written until deepmind_lab can be installed and tested here."""

    def validate(self, env_cfg) -> None:
        installed = importlib.util.find_spec("deepmind_lab") is not None
        missing = "sf_hydra has no DeepMind Lab adapter yet" if installed else (
            "deepmind_lab is not installed; DeepMind Lab is built from source (github.com/google-deepmind/lab, "
            "not on PyPI) and sf_hydra has no adapter for it yet")
        raise ConfigError("env.family", env_cfg.family,
                          f"an env family that can be built here: {missing} (not available)")

    def make(self, env_cfg, seed=None, render_mode=None):
        self.validate(env_cfg)
