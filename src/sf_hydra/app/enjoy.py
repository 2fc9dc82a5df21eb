"""Evaluate a trained run: load its config and checkpoint, play episodes, report returns,
optionally show a window or save each episode as a video (mp4, or an animated GIF).

    python enjoy.py experiment=cartpole episodes=10 video=true

The policy acts exactly as in the rollout workers (same model class, same observation and
action handling); only the env is built here, one at a time. The episodes are played by
sf_hydra.evaluation.episodes, as the evaluation during training plays them. In a multi-agent env every agent
acts with its trained policy (`agent_policies`); the video shows agent 0's view.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import List, Optional

import numpy as np
import torch
from gymnasium.error import DependencyNotInstalled

from sf_hydra.app.loggers import log_videos
from sf_hydra.config.schema import TrainConfig
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.faults import Fault
from sf_hydra.core.files import write_atomically
from sf_hydra.core.run_dir import best_checkpoint_name, checkpoint_dir, read_best
from sf_hydra.core.targets import check_targets
from sf_hydra.envs import check_env, make_env
from sf_hydra.evaluation.episodes import (  # noqa: F401 (Seat, SingleAgent, obs_batch, play_episode: re-exported)
    EpisodeProgress,
    Seat,
    SingleAgent,
    as_multi_agent,
    episode_record,
    obs_batch,
    play_episode,
    play_episodes,
    render_fps,
    save_video,
    video_format,
)
from sf_hydra.evaluation.policy import Policy, load_run_config

log = logging.getLogger("sf_hydra")


def find_checkpoint(run_dir: Path, checkpoint: str, kind: str = "latest", policy: int = 0, train_cfg=None) -> Path:
    """`last`, a file name in the run's checkpoints/, or a path; with kind="best" (load_checkpoint_kind) the
    best checkpoint of trained policy `policy` instead."""
    if str(kind) == "best":
        return best_checkpoint(run_dir, checkpoint, policy, train_cfg)
    candidates = [Path(checkpoint), run_dir / "checkpoints" / checkpoint,
                  run_dir / "checkpoints" / f"{checkpoint}.ckpt"]
    for path in candidates:
        if path.is_file():
            return path
    have = sorted(p.name for p in (run_dir / "checkpoints").glob("*.ckpt"))
    raise ConfigError("checkpoint", checkpoint, f"'last', a path, or one of the run's checkpoints {have}")


def best_checkpoint(run_dir: Path, checkpoint: str, policy: int, train_cfg=None) -> Path:
    if checkpoint != "last":
        raise ConfigError("load_checkpoint_kind", "best", f"latest when checkpoint={checkpoint!r} names a file "
                          "(leave checkpoint at 'last' to load the best checkpoint)")
    path = checkpoint_dir(run_dir) / best_checkpoint_name(policy)
    if not path.is_file():
        run_cfg = train_cfg if train_cfg is not None else TrainConfig  # (its defaults)
        raise ConfigError("load_checkpoint_kind", "best", (
            f"latest: the run in {run_dir} has no best checkpoint of policy {policy} yet ({path.name} is written "
            f"every save_best_every_sec once the policy has trained save_best_after={run_cfg.save_best_after} env "
            f"steps and finished episodes; save_best_metric={run_cfg.save_best_metric})"))
    info = read_best(path) or {}
    log.info("best checkpoint of policy %d: %s=%s at %s env steps (%s)", policy, info.get("metric"),
             info.get("value"), info.get("env_steps"), path)
    return path


def load_run(run_dir: Path, trusted_targets=None):
    """The run's resolved config (what it was trained with), its code checked: evaluation/policy.py
    load_run_config."""
    return load_run_config(run_dir, trusted_targets)


def load_policy(train_cfg, ckpt_path: Path, obs_space, action_space, policy: int = 0) -> Policy:
    """Trained policy `policy` of `ckpt_path`, acting in these spaces (Policy.from_checkpoint)."""
    return Policy.from_checkpoint(train_cfg, ckpt_path, obs_space, action_space, policy)


def seat_policies(cfg, agents: int, num_policies: int) -> List[int]:
    """The trained policy of each agent seat: `agent_policies`, else `policy` for agent 0 and the next
    policies (wrapping around) for the others."""
    if not 0 <= cfg.policy < num_policies:
        raise ConfigError("policy", cfg.policy, f"a trained policy of this run: 0 to {num_policies - 1}")
    if cfg.agent_policies is None:
        return [(cfg.policy + i) % num_policies for i in range(agents)]
    chosen = list(cfg.agent_policies)
    if len(chosen) != agents or not all(0 <= p < num_policies for p in chosen):
        raise ConfigError("agent_policies", chosen, f"a list of {agents} trained policies (one per agent of the "
                          f"env), each 0 to {num_policies - 1}")
    return chosen


def log_to(path: Path) -> None:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    logging.getLogger().addHandler(handler)


# What gymnasium's DependencyNotInstalled names -> our extra that installs it (pyproject.toml). pygame comes as
# pygame-ce (the `render` extra), not gymnasium[classic-control]'s pygame, which clashes with vizdoom's.
EXTRA_OF = {"pygame": "render", "box2d": "box2d", "mujoco": "mujoco"}


class MissingExtra(Fault):
    """Playing needs a package of an optional extra that is not installed: one line naming the extra."""

    def __init__(self, what: str, env_id: str, cause: Exception):
        text = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        module = next((m for m in EXTRA_OF if m in text.lower()), None)
        if module is None:
            super().__init__(f"{what}: {env_id} cannot draw its frames: {text}")
            return
        super().__init__(f"{what}: drawing {env_id} needs {module}, which is not installed: the "
                         f"{EXTRA_OF[module]} extra installs it (pip install \".[{EXTRA_OF[module]}]\" in the "
                         f"checkout, or pip install \"sf_hydra[{EXTRA_OF[module]}]\")")


def enjoy(cfg) -> dict:
    """Plays `cfg.episodes` episodes of the run in `cfg.run_dir`; returns (and writes) the results."""
    run_dir = Path(cfg.run_dir).absolute()
    train_cfg = load_run(run_dir, cfg.trusted_targets)
    check_targets(train_cfg)  # the env family and model parts the run was trained with, user code included
    check_env(train_cfg.env)
    ckpt = find_checkpoint(run_dir, cfg.checkpoint, cfg.load_checkpoint_kind, cfg.policy, train_cfg)
    fmt = video_format(cfg.video_format) if cfg.video else None
    if cfg.video_frames is not None and cfg.video_frames < 1:
        raise ConfigError("video_frames", cfg.video_frames, "an integer >= 1, or null (the whole episode)")
    if not cfg.render:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame's off-screen rendering needs no display
    render_mode = "human" if cfg.render else ("rgb_array" if cfg.video else None)
    env = make_env(train_cfg.env, seed=cfg.seed, render_mode=render_mode)
    torch.set_num_threads(1)
    if cfg.seed is not None:
        torch.manual_seed(cfg.seed)  # sampled actions too: the same command plays the same episodes
    out_dir = run_dir / "enjoy"
    out_dir.mkdir(exist_ok=True)
    log_to(out_dir / "enjoy.log")
    try:
        env = as_multi_agent(env)
        episodes = play(cfg, train_cfg, env, ckpt, out_dir, fmt)
    except DependencyNotInstalled as e:  # the env draws its frames with an optional package (pygame, ...)
        raise MissingExtra("render=true" if cfg.render else "video=true", train_cfg.env.id, e) from None
    finally:
        env.close()
    returns = np.array([e["return"] for e in episodes])
    result = {"checkpoint": str(ckpt), "deterministic": bool(cfg.deterministic), "episodes": episodes,
              "mean_return": float(returns.mean()), "std_return": float(returns.std())}
    if env.num_agents > 1:
        per_agent = np.array([[a["return"] for a in e["agents"]] for e in episodes])
        result["agent_mean_returns"] = [float(x) for x in per_agent.mean(axis=0)]
    text = json.dumps(result, indent=2)
    write_atomically(out_dir / "eval.json", lambda tmp: tmp.write_text(text))
    if cfg.video:  # into the run's W&B run too, when it was trained with W&B
        log_videos(train_cfg, run_dir, [e["video"] for e in episodes if e["video"]],
                   {"enjoy/mean_return": result["mean_return"], "enjoy/std_return": result["std_return"]})
    log.info("%d episodes: return %.2f +- %.2f (%s)", len(episodes), result["mean_return"], result["std_return"],
             out_dir / "eval.json")
    return result


def play(cfg, train_cfg, env, ckpt: Path, out_dir: Path, fmt: Optional[str]) -> List[dict]:
    """The episodes, each with agent 0's return and length (and every agent's, in a multi-agent env)."""
    policies = seat_policies(cfg, env.num_agents, train_cfg.algo.num_policies)
    models = {p: load_policy(train_cfg, ckpt if p == cfg.policy else policy_checkpoint(cfg, ckpt, p),
                             env.observation_space, env.action_space, p) for p in sorted(set(policies))}
    fps = render_fps(env)
    record = (cfg.video_frames or 10**9) if cfg.video else 0
    seeds = [None if cfg.seed is None else cfg.seed + i for i in range(cfg.episodes)]
    episodes = []
    for i, seats, frames in play_episodes([env], [(models[p], p) for p in policies], seeds, cfg.deterministic,
                                          cfg.max_episode_steps, lambda i: record, EpisodeProgress):
        video = None
        if cfg.video and not frames:
            log.warning("video=true: the env gives no images to record (no rgb_array rendering, no image observation)")
        if cfg.video and frames:
            video = str(save_video(frames, out_dir / f"episode_{i:03d}.{fmt}", fps))
        episode = {**episode_record(seats), "video": video}
        episodes.append(episode)
        log.info("episode %d: return %.2f, length %d%s%s", i, seats[0].total, seats[0].steps,
                 "" if env.num_agents == 1 else " | agents' returns " + " ".join(f"{s.total:.2f}" for s in seats),
                 f", {video}" if video else "")
    return episodes


def policy_checkpoint(cfg, ckpt: Path, policy: int) -> Path:
    """The checkpoint another seat's policy loads: the same file, except with load_checkpoint_kind=best,
    where each policy has its own best checkpoint."""
    if str(cfg.load_checkpoint_kind) != "best":
        return ckpt
    return find_checkpoint(Path(cfg.run_dir).absolute(), cfg.checkpoint, "best", policy)
