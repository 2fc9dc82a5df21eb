"""Sample Factory 2.x compatibility: its flags (the one table, `flags.FLAGS`), its env names,
its command lines (`python train.py --env=doom_basic ...`) and its saved config.json
(`python -m sf_hydra.app.import_sf_config`). docs/parameters.md is generated from the table
(`python -m sf_hydra.app.sample_factory.parameter_reference`)."""
