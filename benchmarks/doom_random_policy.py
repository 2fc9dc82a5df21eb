"""A uniform random policy in one Doom scenario, in our env and in Sample Factory's, with the same
seeds: the fraction of episodes that reach the goal (a positive return) and the mean return. Equal
figures say the two envs are the same game (scenario, actions, frameskip, episode end), so a
difference in learning lies in the learner.

    python benchmarks/doom_random_policy.py --episodes 200 --seed 1      # my_way_home
    python benchmarks/doom_random_policy.py --env doom/defend_the_line --sf-env doom_defend_the_line

Returns are the env's own: compare scenarios whose Sample Factory spec does not rescale rewards
inside its env (deadly_corridor's and health_gathering's do, x0.01; their returns differ by that).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from _common import peer_dir  # this script's folder is on sys.path: `python benchmarks/doom_random_policy.py`

REPO = Path(__file__).resolve().parents[1]

# One episode loop for both sides (`env`: a gymnasium env with a Tuple of Discrete actions); the
# templates below it are filled with str.format.
EPISODES = '''
import numpy as np
def random_episodes(env, episodes, seed):
    rng = np.random.default_rng(seed)
    returns = []
    env.reset(seed=seed)
    for _ in range(episodes):
        total, done = 0.0, False
        while not done:
            action = tuple(int(rng.integers(space.n)) for space in env.action_space.spaces)
            _, reward, terminated, truncated, _ = env.step(action)
            total, done = total + reward, terminated or truncated
        returns.append(total)
        env.reset()
    returns = np.array(returns)
    print(f"{len(returns)} episodes, goal reached in {int((returns > 0).sum())}, mean return {returns.mean():.4f}")
'''

OURS = '''
from hydra import compose, initialize_config_dir
from sf_hydra.config import register_configs
register_configs()
with initialize_config_dir({conf!r}, version_base=None):
    cfg = compose("train", overrides=["env={env}"])
from sf_hydra.envs.doom.family import make_doom_env
random_episodes(make_doom_env(cfg.env, seed={seed}), {episodes}, {seed})
'''

SF = '''
from sf_examples.vizdoom.doom.doom_params import default_doom_cfg
from sf_examples.vizdoom.doom.doom_utils import make_doom_env
random_episodes(make_doom_env({sf_env!r}, default_doom_cfg(env={sf_env!r}), None), {episodes}, {seed})
'''


def run(python: str, code: str) -> str:
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"{python} failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="doom/my_way_home", help="our env config")
    p.add_argument("--sf-env", default="doom_my_way_home", help="Sample Factory's env name")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sf-python", default=str(peer_dir("sf_venv") / "bin" / "python"),
                   help="an interpreter with sample-factory: vs_sample_factory.py --setup's (default: %(default)s)")
    a = p.parse_args()
    args = dict(env=a.env, sf_env=a.sf_env, episodes=a.episodes, seed=a.seed, conf=str(REPO / "conf"))
    print(f"{a.env} (ours):   {run(sys.executable, EPISODES + OURS.format(**args))}")
    print(f"{a.sf_env} (SF): {run(a.sf_python, EPISODES + SF.format(**args))}")


if __name__ == "__main__":
    main()
