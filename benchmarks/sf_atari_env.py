"""Sample Factory 2.1.1's Atari example (`sf_examples.atari.train_atari`), with the ALE's ids
registered first. Run with the Sample Factory venv's python:

    ~/.cache/sf_hydra/peers/sf_venv/bin/python benchmarks/sf_atari_env.py --env=atari_pong ...

Its `[atari]` extra wants ale-py 0.8 and ROMs fetched from the internet at install time; ale-py
0.9 bundles the ROMs but registers `PongNoFrameskip-v4` and the other ids only when `ale_py` is
imported, which Sample Factory never does. Importing it here, at module level, registers them in
this process and in every process that re-imports this script as its main module. Every flag is
Sample Factory's.
"""

import sys

import ale_py  # noqa: F401  (registers the ALE's gymnasium ids)
from sf_examples.atari.train_atari import main

if __name__ == "__main__":
    sys.exit(main())
