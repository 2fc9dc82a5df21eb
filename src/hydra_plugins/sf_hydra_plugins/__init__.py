"""sf_hydra's Hydra plugins: the local_parallel launcher and our defaults for the Optuna
sweeper (Hydra instantiates plugins only from the `hydra_plugins` namespace)."""
