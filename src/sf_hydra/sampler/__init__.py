"""The multiprocess sampler: rollout workers, inference servers, shared trajectory buffers and
the data module that hands training batches to the learner. Below the learner, above the
models and envs; it never imports the learner (import-linter contracts in pyproject.toml)."""
