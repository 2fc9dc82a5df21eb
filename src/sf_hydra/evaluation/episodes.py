"""Playing episodes with a trained policy, and saving them as videos: the one code path of `enjoy.py`
(a finished run's checkpoint) and of evaluation during training (sf_hydra.evaluation.process, the weights the
learner just trained), acting through the Python policy (evaluation/policy.py). The policy acts exactly as in
the rollout workers (same model class, same observation
and action handling); the envs are built by the caller. Several envs play their games in lockstep, with one
forward pass per model and step for every seat it plays (the evaluation process: its M games at once); one
env plays them one after another (enjoy.py).

Light on purpose: no Lightning, no sampler; an evaluation process imports this module."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.spaces import obs_specs, to_env_action
from sf_hydra.envs.episode_info import game_continues
from sf_hydra.envs.multi_agent.protocol import is_multi_agent
from sf_hydra.evaluation.policy import Policy, stacked_obs

log = logging.getLogger("sf_hydra")


def obs_batch(obs, specs) -> Dict[str, torch.Tensor]:
    """One env's observation as a batch of one, with the dtypes the trajectory buffers use."""
    return stacked_obs([obs], specs)


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
    """One agent of the env and the trained policy that plays it (`agent`, a Policy; `policy`: its index in the
    run): its RNN state and its first episode's totals."""

    def __init__(self, agent: Policy, policy: int):
        self.agent, self.policy = agent, policy
        self.rnn = agent.initial_state()
        self.total, self.steps, self.done = 0.0, 0, False

    def record(self, reward: float, episode_over: bool, life_over: bool) -> None:
        """An agent's totals count its first whole game: a done whose info says the game goes on (a lost
        Atari life) continues it, with a fresh RNN state as in training."""
        if not self.done:
            self.total, self.steps = self.total + float(reward), self.steps + 1
            self.done = episode_over
        if life_over and self.rnn is not None:
            self.rnn = torch.zeros_like(self.rnn)


class Game:
    """One game on one env: its seats, the agents' current observations, its frames and step count."""

    def __init__(self, index: int, env, seats: List[Seat], seed: Optional[int], record_frames: int = 0,
                 progress=None):
        self.index, self.env, self.seats, self.record_frames, self.progress = index, env, seats, record_frames, progress
        self.obs, _ = env.reset(seed=seed)
        self.frames: list = []
        self.steps = 0

    def step(self, actions: list, max_steps: Optional[int]) -> bool:
        """Takes the agents' actions; True when the game is over (each agent's first episode, or max_steps)."""
        if len(self.frames) < self.record_frames and not self.seats[0].done:
            self.frames.append(image_of(self.env, self.obs[0]))
        self.obs, rewards, terminated, truncated, infos = self.env.step(actions)
        self.steps += 1
        for seat, reward, te, tr, info in zip(self.seats, rewards, terminated, truncated, infos):
            seat.record(reward, (te or tr) and not game_continues(info), te or tr)
        if self.progress is not None:
            self.progress(self.steps, self.seats)
        return all(seat.done for seat in self.seats) or (max_steps is not None and self.steps >= max_steps)


def act(games: Sequence[Game], specs, deterministic: bool) -> List[list]:
    """Every game's env actions for this step: one forward pass per policy over all the seats it plays
    (each seat's RNN state goes in and comes back)."""
    actions = [[None] * len(g.seats) for g in games]
    by_agent: Dict[int, list] = {}
    for gi, g in enumerate(games):
        for si, seat in enumerate(g.seats):
            by_agent.setdefault(id(seat.agent), []).append((gi, si))
    for places in by_agent.values():
        seats = [games[gi].seats[si] for gi, si in places]
        rnn = None if seats[0].rnn is None else torch.cat([seat.rnn for seat in seats])
        out = seats[0].agent.step(stacked_obs([games[gi].obs[si] for gi, si in places], specs), rnn, deterministic)
        chosen = out.actions.cpu().numpy()
        for row, ((gi, si), seat) in enumerate(zip(places, seats)):
            actions[gi][si] = to_env_action(games[gi].env.action_space, chosen[row])
            if seat.rnn is not None:
                seat.rnn = out.rnn_states[row:row + 1]
    return actions


def play_episode(env, seats: List[Seat], specs, deterministic: bool, seed: Optional[int], max_steps: Optional[int],
                 record_frames: int = 0, progress=None) -> Tuple[List[Seat], List[np.ndarray]]:
    """One game of every agent: played until each agent's first episode has ended (or max_steps);
    the first `record_frames` frames of agent 0's view are kept."""
    game = Game(0, env, seats, seed, record_frames, progress)
    while not game.step(act([game], specs, deterministic)[0], max_steps):
        pass
    return game.seats, [f for f in game.frames if f is not None]


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


def eval_video_format(requested: str, video_every: int) -> str:
    """eval.video_format resolved as video_format does (gif while eval.video_every=0: no video is written);
    ConfigError naming eval.video_format for mp4 without imageio-ffmpeg."""
    if video_every <= 0:
        return "gif"
    try:
        return video_format(requested)
    except ConfigError as e:
        raise ConfigError("eval.video_format", requested, e.allowed) from None


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


def as_multi_agent(env):
    """`env` seen through the multi-agent protocol: a multi-agent env as it is, else wrapped in SingleAgent."""
    return env if is_multi_agent(env) else SingleAgent(env)


def render_fps(env) -> float:
    """The frame rate the env declares for its rendering (30 when it declares none): a video's speed."""
    meta = getattr(env, "metadata", None) or getattr(getattr(env, "env", None), "metadata", {}) or {}
    return meta.get("render_fps") or 30


def play_episodes(envs: Sequence, seat_models: Sequence[Tuple[Union[Policy, torch.nn.Module], int]],
                  seeds: Sequence[Optional[int]],
                  deterministic: bool, max_steps: Optional[int], record_frames: Callable[[int], int] = lambda i: 0,
                  progress: Optional[Callable[[int], Callable]] = None) -> Iterator[Tuple[int, List[Seat], list]]:
    """One game per entry of `seeds` (each reset with its seed; None: unseeded), every agent seat played by
    its (Policy, or a bare network acting in the envs' spaces; its index in the run) of `seat_models`, each game
    with fresh RNN states. The `envs` (of one space) play
    `len(envs)` games at a time in lockstep, one forward pass per model and step (`act`); a game that ends
    hands its env to the next seed. Yields (i, seats, frames) as each game ends (in the seeds' order with one
    env; games ending at one step in theirs): the seats hold each agent's return and length (Seat.total,
    Seat.steps); `frames` the first `record_frames(i)` images of agent 0's view.

    With sampled actions (deterministic=False) the draws of several games interleave: the games depend on
    len(envs) (and on the seeds, the weights and torch's generator)."""
    specs = obs_specs(envs[0].observation_space)
    agents = {id(m): m if isinstance(m, Policy) else Policy(m, envs[0].observation_space, envs[0].action_space)
              for m, _ in seat_models}
    seat_models = [(agents[id(m)], k) for m, k in seat_models]
    waiting = iter(enumerate(seeds))

    def start(env) -> Optional[Game]:
        i, seed = next(waiting, (None, None))
        if i is None:
            return None
        return Game(i, env, [Seat(model, policy) for model, policy in seat_models], seed, record_frames(i),
                    progress(i) if progress is not None else None)

    games = [g for g in (start(env) for env in envs) if g is not None]
    while games:
        over = [g.step(a, max_steps) for g, a in zip(games, act(games, specs, deterministic))]
        going = []
        for g, done in zip(games, over):
            if not done:
                going.append(g)
                continue
            yield g.index, g.seats, [f for f in g.frames if f is not None]
            following = start(g.env)
            if following is not None:
                going.append(following)
        games = going


def episode_record(seats: List[Seat]) -> Dict:
    """What one game's report holds: agent 0's return and length, and each agent's in a multi-agent env."""
    record = {"return": seats[0].total, "length": seats[0].steps}
    if len(seats) > 1:
        record["agents"] = [{"policy": s.policy, "return": s.total, "length": s.steps} for s in seats]
    return record
