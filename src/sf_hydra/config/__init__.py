"""Config schema, registration and validation."""

from sf_hydra.config.errors import ConfigError
from sf_hydra.config.store import register_configs
from sf_hydra.config.validation import validate

__all__ = ["ConfigError", "register_configs", "validate"]
