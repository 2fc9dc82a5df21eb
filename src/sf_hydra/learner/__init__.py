"""The learner: the PPO LightningModule, its losses, checkpoints, opponent pool and
population-based training. Above the models; it never imports the sampler, nor the sampler
it (train.py joins the two; import-linter contracts in pyproject.toml)."""
