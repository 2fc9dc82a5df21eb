"""Evaluate a trained run: load its config and checkpoint, play episodes, report returns,
optionally show a window or save each episode as a video (mp4, or an animated GIF).

    python enjoy.py experiment=cartpole episodes=10 video=true

The policy acts exactly as in the rollout workers (same model class, same observation and
action handling); only the env is built here, one at a time. In a multi-agent env every agent
acts with its trained policy (`agent_policies`); the video shows agent 0's view.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from gymnasium.error import DependencyNotInstalled
from omegaconf import OmegaConf

from sf_hydra.config.errors import ConfigError
from sf_hydra.envs import check_env, make_env
from sf_hydra.envs.episode_info import game_continues
from sf_hydra.envs.multi_agent.protocol import is_multi_agent
from sf_hydra.faults import Fault
from sf_hydra.loggers import log_videos
from sf_hydra.models import build_model
from sf_hydra.run_dir import best_checkpoint_name, checkpoint_dir, read_best
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


class SingleAgent:
    """A gymnasium env seen through the multi-agent protocol (sf_hydra.envs.multi_agent): lists of one
    agent's values, and a done is followed at once by a reset whose observation `step` returns."""

    num_agents = 1

    def __init__(self, env):
        self.env = env
        self.observation_space, self.action_space = env.observation_space, env.action_space

    def reset(self, seed=None):
        obs, info = self.env.reset(seed=seed)
        return [obs], [info]

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions[0])
        if terminated or truncated:
            obs, _ = self.env.reset()
        return [obs], [reward], [terminated], [truncated], [info]

    def render(self):
        return self.env.render() if self.env.render_mode == "rgb_array" else None

    def close(self):
        self.env.close()


def image_of(env, obs) -> Optional[np.ndarray]:
    """An RGB frame: the env's own rendering, else the observation when it is an image."""
    frame = env.render() if isinstance(env, SingleAgent) else None
    if frame is None:
        pixels = np.asarray(obs["obs"] if isinstance(obs, dict) else obs)
        if pixels.ndim == 3 and pixels.shape[0] in (1, 3, 4) and pixels.shape[-1] not in (1, 3, 4):
            pixels = pixels.transpose(1, 2, 0)  # CHW -> HWC
        frame = pixels[..., -3:] if pixels.ndim == 3 and pixels.shape[-1] >= 3 else None
    return None if frame is None else np.ascontiguousarray(frame).astype(np.uint8)


class Seat:
    """One agent of the env and the policy that plays it: its RNN state and its first episode's totals."""

    def __init__(self, model, policy: int):
        self.model, self.policy = model, policy
        self.rnn = torch.zeros(1, model.rnn_state_size) if model.core is not None else None
        self.total, self.steps, self.done = 0.0, 0, False

    def act(self, obs, specs, deterministic: bool):
        out = self.model.act(obs_batch(obs, specs), self.rnn, deterministic=deterministic)
        self.rnn = out.rnn_states
        return out.actions[0].numpy()

    def record(self, reward: float, episode_over: bool, life_over: bool) -> None:
        """An agent's totals count its first whole game: a done whose info says the game goes on (a lost
        Atari life) continues it, with a fresh RNN state as in training."""
        if not self.done:
            self.total, self.steps = self.total + float(reward), self.steps + 1
            self.done = episode_over
        if life_over and self.rnn is not None:
            self.rnn = torch.zeros_like(self.rnn)


def play_episode(env, seats: List[Seat], specs, deterministic: bool, seed: Optional[int], max_steps: Optional[int],
                 record_frames: int = 0, progress=None) -> Tuple[List[Seat], List[np.ndarray]]:
    """One game of every agent: played until each agent's first episode has ended (or max_steps);
    the first `record_frames` frames of agent 0's view are kept."""
    obs, _ = env.reset(seed=seed)
    frames, steps = [], 0
    while True:
        if len(frames) < record_frames and not seats[0].done:
            frames.append(image_of(env, obs[0]))
        actions = [to_env_action(env.action_space, seat.act(o, specs, deterministic)) for seat, o in zip(seats, obs)]
        obs, rewards, terminated, truncated, infos = env.step(actions)
        steps += 1
        for seat, reward, te, tr, info in zip(seats, rewards, terminated, truncated, infos):
            seat.record(reward, (te or tr) and not game_continues(info), te or tr)
        if progress is not None:
            progress(steps, seats)
        if all(seat.done for seat in seats) or (max_steps is not None and steps >= max_steps):
            return seats, [f for f in frames if f is not None]


class EpisodeProgress:
    """A log line every `interval` seconds while a long episode plays (a slow env, a recorded video)."""

    def __init__(self, episode: int, interval: float = 5.0):
        self.episode, self.interval, self.next = episode, interval, time.monotonic() + interval

    def __call__(self, steps: int, seats: List[Seat]) -> None:
        if time.monotonic() >= self.next:
            self.next = time.monotonic() + self.interval
            log.info("episode %d: %d steps so far, return %.2f", self.episode, steps, seats[0].total)


def has_ffmpeg() -> bool:
    """imageio and the ffmpeg binary its imageio-ffmpeg package ships (`pip install 'sf_hydra[video]'`)."""
    try:
        import imageio  # noqa: F401  (the optional `video` extra: probed, not required)
        import imageio_ffmpeg  # noqa: F401  (as above)
    except ImportError:
        return False
    return True


def video_format(requested: str) -> str:
    """mp4 needs imageio-ffmpeg (has_ffmpeg); gif needs Pillow only."""
    has = has_ffmpeg()
    if str(requested) == "mp4" and not has:
        raise ConfigError("video_format", "mp4", "gif or auto: mp4 needs imageio and imageio-ffmpeg "
                          "(pip install 'sf_hydra[video]')")
    if str(requested) == "auto":
        return "mp4" if has else "gif"
    return str(requested)


def viewable(frames: List[np.ndarray], min_height: int = 256) -> List[np.ndarray]:
    """Frames of even size (H.264 needs it), small ones (an observation, 72 x 128 for Doom) scaled up by a
    whole factor with nearest-neighbour pixels."""
    factor = max(1, -(-min_height // frames[0].shape[0]))
    out = []
    for f in frames:
        if factor > 1:
            f = f.repeat(factor, axis=0).repeat(factor, axis=1)
        out.append(np.pad(f, ((0, f.shape[0] % 2), (0, f.shape[1] % 2), (0, 0)), mode="edge"))
    return out


def save_video(frames: List[np.ndarray], path: Path, fps: float) -> Path:
    """`path`'s suffix picks the format: .mp4 (H.264 through imageio-ffmpeg) or .gif."""
    if path.suffix == ".gif":
        return save_gif(frames, path, fps)
    import imageio.v2 as imageio  # the optional `video` extra, only for an mp4

    imageio.mimwrite(path, viewable(frames), fps=fps, macro_block_size=2)
    return path


def save_gif(frames: List[np.ndarray], path: Path, fps: float) -> Path:
    from PIL import Image  # only for a GIF: Pillow stays unloaded otherwise

    images = [Image.fromarray(f) for f in frames]
    centiseconds = max(1, round(100 / fps))  # GIF frame times are whole centiseconds
    images[0].save(path, save_all=True, append_images=images[1:], duration=centiseconds * 10, loop=0)
    return path


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
    train_cfg = load_run(run_dir)
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
        env = env if is_multi_agent(env) else SingleAgent(env)
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
    (out_dir / "eval.json").write_text(json.dumps(result, indent=2))
    if cfg.video:  # into the run's W&B run too, when it was trained with W&B
        log_videos(train_cfg, run_dir, [e["video"] for e in episodes if e["video"]],
                   {"enjoy/mean_return": result["mean_return"], "enjoy/std_return": result["std_return"]})
    log.info("%d episodes: return %.2f +- %.2f (%s)", len(episodes), result["mean_return"], result["std_return"],
             out_dir / "eval.json")
    return result


def play(cfg, train_cfg, env, ckpt: Path, out_dir: Path, fmt: Optional[str]) -> List[dict]:
    """The episodes, each with agent 0's return and length (and every agent's, in a multi-agent env)."""
    num_policies = OmegaConf.select(train_cfg, "algo.num_policies", default=1)
    policies = seat_policies(cfg, env.num_agents, num_policies)
    models = {p: load_policy(train_cfg, ckpt if p == cfg.policy else policy_checkpoint(cfg, ckpt, p),
                             env.observation_space, env.action_space, p) for p in sorted(set(policies))}
    specs = obs_specs(env.observation_space)
    fps = (getattr(env, "metadata", None) or getattr(getattr(env, "env", None), "metadata", {}) or {})
    fps = fps.get("render_fps") or 30
    record = (cfg.video_frames or 10**9) if cfg.video else 0
    episodes = []
    for i in range(cfg.episodes):
        seed = None if cfg.seed is None else cfg.seed + i
        seats = [Seat(models[p], p) for p in policies]
        seats, frames = play_episode(env, seats, specs, cfg.deterministic, seed, cfg.max_episode_steps, record,
                                     EpisodeProgress(i))
        video = None
        if cfg.video and not frames:
            log.warning("video=true: the env gives no images to record (no rgb_array rendering, no image observation)")
        if cfg.video and frames:
            video = str(save_video(frames, out_dir / f"episode_{i:03d}.{fmt}", fps))
        episode = {"return": seats[0].total, "length": seats[0].steps, "video": video}
        if env.num_agents > 1:
            episode["agents"] = [{"policy": s.policy, "return": s.total, "length": s.steps} for s in seats]
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
