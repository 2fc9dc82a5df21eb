"""Evaluate a trained run: `python enjoy.py experiment=cartpole video=true` (see README.md)."""

if __name__ == "__main__":
    from sf_hydra.app.cli import enjoy_main  # here, not above: see train.py

    enjoy_main()
