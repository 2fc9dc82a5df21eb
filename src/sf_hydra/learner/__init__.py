"""The learner: the PPO LightningModule, its losses, checkpoints, opponent pool and
population-based training. Above the sampler's data and the models; it never imports
the sampler's processes (import-linter contracts in pyproject.toml)."""
