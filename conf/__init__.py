"""sf_hydra's Hydra configs as a package (`sf_hydra_conf`, via the src/sf_hydra_conf link), so a
non-editable install (`pip install .`) ships them and Hydra finds them at `pkg://sf_hydra_conf`.
Nothing here is Python beyond this file: the configs are the package's data (pyproject.toml)."""
