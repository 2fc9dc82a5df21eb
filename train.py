"""Train an agent: `python train.py env=doom/basic algo=appo` (see README.md)."""

if __name__ == "__main__":
    # Imported here, not above: every sampler process imports this file again (as `__mp_main__`),
    # and needs none of the command line's code (Hydra, the config checks: ~0.2 s each here).
    from sf_hydra.app.cli import train_main

    train_main()
