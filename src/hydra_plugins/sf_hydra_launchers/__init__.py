"""sf_hydra's Hydra launcher plugins (Hydra only instantiates launchers from `hydra_plugins`)."""
