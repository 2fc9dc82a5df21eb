"""Evaluate a trained run: load its config and checkpoint, play episodes, report returns,
optionally show a window or save each episode as an animated GIF.

    python enjoy.py experiment=cartpole episodes=10 video=true

The policy acts exactly as in the rollout workers (same model class, same observation and
action handling); only the env is built here, one at a time.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch
from omegaconf import OmegaConf

from sf_hydra.config.errors import ConfigError
from sf_hydra.envs import check_env, make_env
from sf_hydra.envs.episode_info import game_continues
from sf_hydra.loggers import log_videos
from sf_hydra.spaces import obs_specs, to_env_action
from sf_hydra.targets import check_targets

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
    from sf_hydra.run_dir import best_checkpoint_name, checkpoint_dir, read_best

    if checkpoint != "last":
        raise ConfigError("load_checkpoint_kind", "best", f"latest when checkpoint={checkpoint!r} names a file "
                          "(leave checkpoint at 'last' to load the best checkpoint)")
    path = checkpoint_dir(run_dir) / best_checkpoint_name(policy)
    if not path.is_file():
        select = (lambda key, default: OmegaConf.select(train_cfg, key, default=default)) if train_cfg is not None \
            else (lambda key, default: default)
        raise ConfigError("load_checkpoint_kind", "best", (
            f"latest: the run in {run_dir} has no best checkpoint of policy {policy} yet ({path.name} is written "
            f"every save_best_every_sec once the policy has trained save_best_after="
            f"{select('save_best_after', 100_000)} env steps and finished episodes; save_best_metric="
            f"{select('save_best_metric', 'reward')})"))
    info = read_best(path) or {}
    log.info("best checkpoint of policy %d: %s=%s at %s env steps (%s)", policy, info.get("metric"),
             info.get("value"), info.get("env_steps"), path)
    return path


def load_run(run_dir: Path):
    """The run's resolved config (what it was trained with)."""
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        runs = sorted(p.parent.name for p in run_dir.parent.glob("*/config.yaml"))
        raise ConfigError("experiment", run_dir.name, f"a trained run in {run_dir.parent} (found: {runs or 'none'})")
    cfg = OmegaConf.load(saved)
    missing = [key for key in ("env.factory", "model._target_") if OmegaConf.select(cfg, key) is None]
    if missing:  # saved before families and networks were named by dotted paths
        raise ConfigError("experiment", run_dir.name, f"a run whose {saved} names its env family and network "
                          f"(it has no {' / '.join(missing)}: an older sf_hydra saved it; its checkpoint still loads: "
                          "run its train command again, which resumes it and saves the config anew)")
    return cfg


def load_policy(train_cfg, ckpt_path: Path, obs_space, action_space, policy: int = 0):
    """The weights of trained policy `policy` (`policies.<k>.` in the checkpoint; `model.` in
    checkpoints saved before several policies)."""
    from sf_hydra.models import build_model

    num_policies = OmegaConf.select(train_cfg, "algo.num_policies", default=1)
    if not 0 <= policy < num_policies:
        raise ConfigError("policy", policy, f"a trained policy of this run: 0 to {num_policies - 1}")
    model = build_model(train_cfg, obs_space, action_space)
    state = torch.load(ckpt_path, map_location="cpu", weights_only=True)["state_dict"]
    prefix = f"policies.{policy}." if any(k.startswith("policies.") for k in state) else "model."
    model.load_state_dict({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})
    return model.eval()


def obs_batch(obs, specs) -> Dict[str, torch.Tensor]:
    """One env's observation as a batch of one, with the dtypes the trajectory buffers use."""
    items = obs.items() if isinstance(obs, dict) else [("obs", obs)]
    return {k: torch.as_tensor(np.asarray(v)).to(specs[k][1]).reshape(1, *specs[k][0]) for k, v in items}


def image_of(env, obs) -> Optional[np.ndarray]:
    """An RGB frame: the env's own rendering, else the observation when it is an image."""
    frame = env.render() if env.render_mode == "rgb_array" else None
    if frame is None:
        pixels = np.asarray(obs["obs"] if isinstance(obs, dict) else obs)
        if pixels.ndim == 3 and pixels.shape[0] in (1, 3, 4) and pixels.shape[-1] not in (1, 3, 4):
            pixels = pixels.transpose(1, 2, 0)  # CHW -> HWC
        frame = pixels[..., -3:] if pixels.ndim == 3 and pixels.shape[-1] >= 3 else None
    return None if frame is None else np.ascontiguousarray(frame).astype(np.uint8)


def play_episode(env, model, specs, deterministic: bool, seed: Optional[int], record: bool, max_steps: Optional[int]):
    """One whole game: a done whose info says the game goes on (e.g. a lost Atari life) is
    followed by a reset that continues it, with a fresh RNN state as in training."""
    obs, _ = env.reset(seed=seed)
    rnn = torch.zeros(1, model.rnn_state_size) if model.core is not None else None
    total, steps, frames = 0.0, 0, []
    while True:
        if record:
            frames.append(image_of(env, obs))
        out = model.act(obs_batch(obs, specs), rnn, deterministic=deterministic)
        rnn = out.rnn_states
        obs, reward, terminated, truncated, info = env.step(to_env_action(env.action_space, out.actions[0].numpy()))
        total, steps = total + float(reward), steps + 1
        if (max_steps is not None and steps >= max_steps) or ((terminated or truncated) and not game_continues(info)):
            return total, steps, [f for f in frames if f is not None]
        if terminated or truncated:
            obs, _ = env.reset()
            rnn = None if rnn is None else torch.zeros_like(rnn)


def save_gif(frames: List[np.ndarray], path: Path, fps: float) -> Path:
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    centiseconds = max(1, round(100 / fps))  # GIF frame times are whole centiseconds
    images[0].save(path, save_all=True, append_images=images[1:], duration=centiseconds * 10, loop=0)
    return path


def log_to(path: Path) -> None:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    logging.getLogger().addHandler(handler)


def enjoy(cfg) -> dict:
    """Plays `cfg.episodes` episodes of the run in `cfg.run_dir`; returns (and writes) the results."""
    run_dir = Path(cfg.run_dir).absolute()
    train_cfg = load_run(run_dir)
    check_targets(train_cfg)  # the env family and model parts the run was trained with, user code included
    check_env(train_cfg.env)
    ckpt = find_checkpoint(run_dir, cfg.checkpoint, cfg.load_checkpoint_kind, cfg.policy, train_cfg)
    render_mode = "human" if cfg.render else ("rgb_array" if cfg.video else None)
    env = make_env(train_cfg.env, seed=cfg.seed, render_mode=render_mode)
    torch.set_num_threads(1)
    out_dir = run_dir / "enjoy"
    out_dir.mkdir(exist_ok=True)
    log_to(out_dir / "enjoy.log")
    try:
        model = load_policy(train_cfg, ckpt, env.observation_space, env.action_space, cfg.policy)
        specs = obs_specs(env.observation_space)
        fps = env.metadata.get("render_fps") or 30
        episodes = []
        for i in range(cfg.episodes):
            seed = None if cfg.seed is None else cfg.seed + i
            ret, length, frames = play_episode(env, model, specs, cfg.deterministic, seed, cfg.video,
                                               cfg.max_episode_steps)
            video = str(save_gif(frames, out_dir / f"episode_{i:03d}.gif", fps)) if cfg.video and frames else None
            episodes.append({"return": ret, "length": length, "video": video})
            log.info("episode %d: return %.2f, length %d%s", i, ret, length, f", {video}" if video else "")
    finally:
        env.close()
    returns = np.array([e["return"] for e in episodes])
    result = {"checkpoint": str(ckpt), "deterministic": bool(cfg.deterministic), "episodes": episodes,
              "mean_return": float(returns.mean()), "std_return": float(returns.std())}
    (out_dir / "eval.json").write_text(json.dumps(result, indent=2))
    if cfg.video:  # into the run's W&B run too, when it was trained with W&B
        log_videos(train_cfg, run_dir, [e["video"] for e in episodes if e["video"]],
                   {"enjoy/mean_return": result["mean_return"], "enjoy/std_return": result["std_return"]})
    log.info("%d episodes: return %.2f +- %.2f (%s)", len(episodes), result["mean_return"], result["std_return"],
             out_dir / "eval.json")
    return result
