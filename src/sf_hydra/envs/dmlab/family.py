"""Imported when a config asks for `env.family=dmlab`: fails with what is missing (the registry
turns the ImportError into a ConfigError before any process starts)."""

try:
    import deepmind_lab  # noqa: F401
except ImportError as e:
    raise ImportError("deepmind_lab is not installed: DeepMind Lab is built from source (github.com/google-deepmind/lab), it is not on PyPI") from e

raise ImportError("deepmind_lab is installed, but sf_hydra has no DMLab adapter yet")
