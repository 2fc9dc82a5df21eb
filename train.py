"""Train an agent: `python train.py env=doom/basic algo=appo` (see README.md)."""

from sf_hydra.cli import train_main

if __name__ == "__main__":
    train_main()
