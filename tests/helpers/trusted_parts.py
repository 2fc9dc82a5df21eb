"""A module a user trusts by name (trusted_targets): an encoder of theirs, and a name it merely imports."""

from builtins import open as opener  # noqa: F401 (imported, not defined here: trusting this module must not open it)

from sf_hydra.models.encoders import MultiKeyEncoder


class WrappedEncoder(MultiKeyEncoder):
    """The default encoder under the user's own name."""
