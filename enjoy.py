"""Evaluate a trained run: `python enjoy.py experiment=cartpole video=true` (see README.md)."""

from sf_hydra.cli import enjoy_main

if __name__ == "__main__":
    enjoy_main()
