"""sf_hydra: asynchronous PPO at high throughput, configured with Hydra. `from sf_hydra import Policy` gives a
trained policy to call from Python (evaluation/policy.py); importing the package itself loads nothing else."""

__all__ = ["Policy"]


def __getattr__(name: str):
    if name == "Policy":  # loaded on first use: `import sf_hydra` stays free of torch
        from sf_hydra.evaluation.policy import Policy

        return Policy
    raise AttributeError(f"module 'sf_hydra' has no attribute {name!r}")
