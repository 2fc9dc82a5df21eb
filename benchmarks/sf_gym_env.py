"""Sample Factory 2.1.1's gym example for any registered gymnasium id (its own example,
`sf_examples.train_gym_env`, registers CartPole-v1 only). Run with the Sample Factory venv's python:

    ~/.cache/sf_hydra/peers/sf_venv/bin/python benchmarks/sf_gym_env.py --env=Acrobot-v1 --algo=APPO ...

Every flag is Sample Factory's; nothing but the env registration differs from its example.
"""

import sys

import gymnasium as gym
from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
from sample_factory.envs.env_utils import register_env
from sample_factory.train import run_rl


def make_env(full_env_name, cfg=None, env_config=None, render_mode=None):
    return gym.make(full_env_name, render_mode=render_mode)


def main() -> int:
    env_id = next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--env="))
    register_env(env_id, make_env)
    parser, _ = parse_sf_args()
    return run_rl(parse_full_cfg(parser))


if __name__ == "__main__":
    sys.exit(main())
