"""The evaluation process: on each request it loads every trained policy's weights from its store (where
the learner's Evaluation callback copied them at the requested env steps), plays `episodes` games with each
(sf_hydra.evaluation.episodes, enjoy.py's code), appends one line to `<run_dir>/eval/evaluations.jsonl` and
sends the same record back.

Invariants:
- No Lightning here (importing it costs seconds): this module imports the episode code, the models, the
  envs and the policy store only.
- The process reads weights only between two requests: the callback writes the stores only while no request
  is pending, so an evaluation never sees a half-written or mixed set of weights.
- It runs at a lower priority (EVAL_NICE) than training: on a machine whose cores training fills, the
  evaluation waits rather than slowing training down.
- A failure ends the process with an EvalFailed record (its traceback) on the results queue.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import torch

from sf_hydra.core.seeding import EVALUATION, eval_env_seed, process_seed, seed_process
from sf_hydra.envs import make_env
from sf_hydra.evaluation.episodes import as_multi_agent, episode_record, play_episodes, render_fps, save_video
from sf_hydra.models.actor_critic import build_model
from sf_hydra.models.recipe import ModelRecipe
from sf_hydra.sampler import mp

log = logging.getLogger("sf_hydra")

EVAL_NICE = 10  # niceness added to the evaluation process: training keeps the cores it needs
# At most this many games of an evaluation play at once (one env each, in lockstep: one forward pass per step
# for all of them); a multi-agent env plays its games one at a time (each env may be several processes).
MAX_EVAL_ENVS = 10
RESULTS_FILE = "evaluations.jsonl"
EVAL_DIR = "eval"


@dataclass(frozen=True)
class EvalSettings:
    """What the evaluation process plays with; plain values (it reaches the process by pickle)."""

    run_dir: str
    seed: Optional[int]  # the run's seed (None: the process draws one from the OS's entropy)
    num_policies: int
    episodes: int
    deterministic: bool
    max_episode_steps: Optional[int]
    video_every: int  # 0: no videos
    video_format: str  # mp4 or gif (resolved)
    video_frames: Optional[int]
    env: Dict[str, Any] = field(repr=False)  # the run's env node with eval.env_overrides merged, resolved
    model: ModelRecipe = field(repr=False)
    max_envs: int = MAX_EVAL_ENVS  # games played at once (single-agent envs)

    @property
    def out_dir(self) -> Path:
        return Path(self.run_dir) / EVAL_DIR


@dataclass(frozen=True)
class EvalRequest:
    """Evaluate the weights in the stores: evaluation number `index`, taken at the run's `env_steps`;
    `policy_env_steps` and `versions` are each policy's own at that moment."""

    index: int
    env_steps: int
    policy_env_steps: List[int]
    versions: List[int]


@dataclass(frozen=True)
class EvalFailed:
    traceback: str


def policy_result(policy: int, version: int, env_steps: int, episodes: List[dict]) -> dict:
    """One policy's part of an evaluation record: its games and their mean and std."""
    returns = np.array([e["return"] for e in episodes], dtype=np.float64)
    lengths = np.array([e["length"] for e in episodes], dtype=np.float64)
    return {"policy": policy, "version": version, "env_steps": env_steps,
            "return": float(returns.mean()), "return_std": float(returns.std()),
            "length": float(lengths.mean()), "episodes": episodes}


class Evaluator:
    """The process's state: the envs its games play on (the eval overrides applied; min(episodes, max_envs)
    of a single-agent env, one of a multi-agent env), one model per trained policy."""

    def __init__(self, settings: EvalSettings, stores):
        self.settings, self.stores = settings, stores
        self.base_seed = settings.seed if settings.seed is not None else process_seed(None, EVALUATION, 0)
        self.seeds = [eval_env_seed(self.base_seed, j) for j in range(settings.episodes)]
        render = "rgb_array" if settings.video_every > 0 else None  # a video is of game 0, played on env 0
        self.env = as_multi_agent(make_env(settings.env, seed=self.seeds[0], render_mode=render))
        self.envs = [self.env]
        width = 1 if self.env.num_agents > 1 else max(1, min(settings.episodes, settings.max_envs))
        self.envs += [as_multi_agent(make_env(settings.env, seed=seed)) for seed in self.seeds[1:width]]
        self.models = [build_model(settings.model, self.env.observation_space, self.env.action_space).eval()
                       for _ in range(settings.num_policies)]
        settings.out_dir.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def evaluate(self, request: EvalRequest) -> dict:
        """Plays every policy's games (each seat of a multi-agent env played by the policy evaluated);
        appends the record to the JSONL file and returns it."""
        s, t0 = self.settings, time.monotonic()
        video_due = s.video_every > 0 and request.index % s.video_every == 0
        record = {"evaluation": request.index, "env_steps": request.env_steps, "time": time.time(),
                  "deterministic": s.deterministic, "seeds": self.seeds, "policies": [], "video": None}
        for k, model in enumerate(self.models):
            version = self.stores[k].load_into(model)
            frames_wanted = (s.video_frames or 10**9) if video_due and k == 0 else 0
            episodes = {}
            with torch.no_grad():
                for i, seats, frames in play_episodes(self.envs, [(model, k)] * self.env.num_agents, self.seeds,
                                                      s.deterministic, s.max_episode_steps,
                                                      lambda i, n=frames_wanted: n if i == 0 else 0):
                    episodes[i] = episode_record(seats)
                    if frames:
                        record["video"] = self._save_video(frames, request.index)
            record["policies"].append(policy_result(k, version, request.policy_env_steps[k],
                                                    [episodes[i] for i in sorted(episodes)]))
        record["seconds"] = time.monotonic() - t0
        with open(s.out_dir / RESULTS_FILE, "a") as f:  # one line per evaluation, whole (one write)
            f.write(json.dumps(record) + "\n")
        return record

    def _save_video(self, frames, index: int) -> str:
        folder = self.settings.out_dir / "videos"
        folder.mkdir(exist_ok=True)
        path = folder / f"evaluation_{index:05d}.{self.settings.video_format}"
        return str(save_video(frames, path, render_fps(self.env)))


def eval_process_main(settings: EvalSettings, stores, requests, results, learner_pid: int,
                      parent_state: Optional[dict] = None) -> None:
    """Entry point of the evaluation process: serves EvalRequests from `requests` until a None, or until
    the learner is gone; each answer (a record, or EvalFailed) goes to `results`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the learner's: it stops us
    if parent_state is not None:
        mp.adopt(parent_state)
    torch.set_num_threads(1)
    seed_process(settings.seed, EVALUATION, 0)
    os.nice(EVAL_NICE)
    watch = mp.ParentWatch(learner_pid)
    evaluator = None
    try:
        evaluator = Evaluator(settings, stores)
        while True:
            try:
                request = requests.get(timeout=1.0)
            except queue.Empty:
                if not watch.alive():
                    break
                continue
            if request is None:
                break
            results.put(evaluator.evaluate(request))
    except BaseException:
        results.put(EvalFailed(traceback.format_exc()))
    finally:
        if evaluator is not None:
            evaluator.close()
        mp.exit_without_teardown(results)
