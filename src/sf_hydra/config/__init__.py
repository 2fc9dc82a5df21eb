"""Config schema, registration and validation."""

from sf_hydra.config.store import register_configs
from sf_hydra.config.validation import validate
from sf_hydra.core.errors import ConfigError

__all__ = ["ConfigError", "register_configs", "validate"]
