"""Envs that report on the process that runs them, for the sampler's hardware flags.

`ProbeCartPole-v0(log_dir=...)`: a CartPole that appends one JSON line to <log_dir>/envs.jsonl
when it is built (pid) and when it is reset with a seed (pid, its worker and env index decoded
from the seed, sampler/rollout_worker.env_seed, the CPU cores it may run on, OMP_NUM_THREADS
and the thread counts threadpoolctl sees). `HwcImage-v0`: a tiny env whose image observation
is channels last, pixel (h, w, c) = (50 c + h + w) mod 256.
"""

import json
import os
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


def _log(log_dir: str, **fields) -> None:
    with (Path(log_dir) / "envs.jsonl").open("a") as f:
        f.write(json.dumps({"pid": os.getpid(), **fields}) + "\n")


def read_log(log_dir) -> list:
    path = Path(log_dir) / "envs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


class ProbeCartPole(CartPoleEnv):
    def __init__(self, log_dir: str, **kwargs):
        super().__init__(**kwargs)
        self.log_dir = log_dir
        _log(log_dir, event="built")

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            from threadpoolctl import threadpool_info

            _log(self.log_dir, event="reset", worker=(seed % 100_003) // 1_009, env_index=(seed % 100_003) % 1_009,
                 cores=sorted(os.sched_getaffinity(0)), omp=os.environ.get("OMP_NUM_THREADS"),
                 pool_threads=[p["num_threads"] for p in threadpool_info()])
        return super().reset(seed=seed, options=options)


def hwc_frame(h: int = 84, w: int = 84, c: int = 3) -> np.ndarray:
    hh, ww, cc = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
    return ((50 * cc + hh + ww) % 256).astype(np.uint8)


class HwcImageEnv(gym.Env):
    observation_space = gym.spaces.Box(0, 255, (84, 84, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return hwc_frame(), {}

    def step(self, action):
        self.t += 1
        return hwc_frame(), 1.0, False, self.t >= 20, {}


gym.register("ProbeCartPole-v0", entry_point=ProbeCartPole, max_episode_steps=500)
gym.register("HwcImage-v0", entry_point=HwcImageEnv)
