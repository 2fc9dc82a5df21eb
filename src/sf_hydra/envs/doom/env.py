"""One ViZDoom game as a gymnasium.Env with channel-first uint8 pixel observations
(plus game variables as a "measurements" vector when the config asks for them)."""

from __future__ import annotations

import hashlib
from typing import Any, Mapping, Optional, Sequence

import gymnasium as gym
import numpy as np

from sf_hydra.core.errors import ConfigError
from sf_hydra.envs.doom.actions import TURN_DELTA, make_action_mapping
from sf_hydra.envs.doom.frames import NearestResize, as_chw, check_resize, downsample, obs_shape
from sf_hydra.envs.doom.game import build_game, parse_buttons, parse_game_variables, to_vizdoom_seed
from sf_hydra.envs.doom.schema import DOOM_TICRATE
from sf_hydra.envs.doom.shaping import DeltaRewards
from sf_hydra.envs.episode_info import SHAPING_UNITS


def _grouped_actions(actions: Mapping[str, Any]):
    """The mapping of the `env.actions` config when it names button groups, else None."""
    groups = [parse_buttons(g) for g in actions.get("groups") or []]
    if not groups:
        return None
    turn_bins = int(actions.get("turn_delta_bins") or 0)
    return make_action_mapping((), groups, parse_buttons([TURN_DELTA])[0], turn_bins,
                               float(actions.get("turn_delta_max", 10.0)))


class DoomEnv(gym.Env):
    """Observation Box(0, 255, (C, H, W), uint8), or Dict {"obs": that, "measurements":
    Box(float32, (k,))} with `measurements` game variables. Actions: see actions.py.

    Rewards are the scenario's own, summed over the `frameskip` tics of a step (the
    sampler applies `reward_scale`). An episode that ends on the scenario's timeout is
    truncated; one that ends by death or by the scenario's own goal is terminated.

    In a multiplayer game (`network_args` host or join one), death does not end the
    episode: the player respawns (the host's rules need +sv_forcerespawn 1). `bots`
    built-in bots are added at every reset (host only).
    `delta_rewards` adds rewards for changes of game variables (see shaping.py) to the
    scenario's own, weighted by `scenario_reward_scale`.
    The last step of an episode reports `episode_stats` game variables (their change over
    the episode: some counters survive new_episode) in info["episode_extra_stats"].

    Saving a single-player game (pickle, as serial mode's checkpoints do: sampler/single_agent_worker.py
    `snapshot`): a running engine cannot be pickled, so the env keeps its episode's reset seed and the
    actions taken since (one small entry a step; a Doom basic episode has <= 75 steps at frameskip 4, a
    deathmatch of a few minutes a few thousand: a few kB in a checkpoint), and unpickling builds a new game,
    resets it with that seed and replays the actions (ViZDoom is deterministic given its seed, the frameskip
    included), then checks the observation equals the saved one and raises EnvReplayError if not. For that
    every episode starts from a seed: a reset without one takes `episode_seed(the env's seed, its index)`.
    A game variable that survives new_episode and is observed (`measurements`) fails that check; a network
    game (bots) refuses to be pickled.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": DOOM_TICRATE}

    def __init__(
        self,
        scenario: str,
        frameskip: int = 4,
        resolution: str = "256x144",
        downsample: int = 2,
        resize: Optional[Sequence[int]] = None,
        grayscale: bool = False,
        episode_timeout: Optional[int] = None,
        max_episode_steps: Optional[int] = None,
        seed: Optional[int] = None,
        render_mode: Optional[str] = None,
        game_settings: Optional[Mapping[str, Any]] = None,
        actions: Optional[Mapping[str, Any]] = None,
        measurements: Sequence[str] = (),
        episode_stats: Sequence[str] = (),
        delta_rewards: Optional[Mapping[str, Sequence[float]]] = None,
        scenario_reward_scale: float = 1.0,
        network_args: str = "",
        bots: int = 0,
    ):
        self._arguments = {k: v for k, v in locals().items() if k not in ("self", "__class__")}  # for pickling
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError("render_mode", render_mode,
                              f"ViZDoom runs headless: use one of {self.metadata['render_modes']} or None")
        if int(frameskip) < 1:
            raise ConfigError("env.frameskip", frameskip, "an integer >= 1")
        if int(downsample) < 1:
            raise ConfigError("env.downsample", downsample, "an integer >= 1 (1: no downsampling)")
        check_resize(resize)
        self.scenario = scenario
        self.frameskip = int(frameskip)
        self.factor = int(downsample)
        self.max_episode_steps = max_episode_steps
        self.render_mode = render_mode
        self.metadata = dict(self.metadata, render_fps=DOOM_TICRATE / self.frameskip)
        self.multiplayer = bool(network_args)
        self.bots = int(bots)

        grouped = _grouped_actions(actions or {})  # None: the scenario's own buttons, one at a time
        variables = parse_game_variables(measurements)
        self.stat_variables = dict(zip(episode_stats, parse_game_variables(episode_stats, "env.episode_stats")))
        self.game = build_game(
            scenario, resolution, grayscale, episode_timeout, seed, game_settings,
            buttons=grouped.buttons if grouped else None, game_variables=variables, network_args=network_args,
        )
        self._closed = False
        self.shaping = DeltaRewards(self.game, delta_rewards) if delta_rewards else None
        self.scenario_reward_scale = float(scenario_reward_scale)
        self.actions = grouped or make_action_mapping(self.game.get_available_buttons())
        self.action_space = self.actions.space
        channels = 1 if grayscale else 3
        shape = obs_shape(channels, self.game.get_screen_height(), self.game.get_screen_width(), self.factor)
        self.resize = None
        if resize is not None:
            self.resize = NearestResize(shape[1], shape[2], int(resize[1]), int(resize[0]))
            shape = (channels, int(resize[1]), int(resize[0]))
        pixels = gym.spaces.Box(0, 255, shape, np.uint8)
        self.n_measurements = len(variables)
        if self.n_measurements:
            vector = gym.spaces.Box(-np.inf, np.inf, (self.n_measurements,), np.float32)
            self.observation_space = gym.spaces.Dict({"obs": pixels, "measurements": vector})
        else:
            self.observation_space = pixels

        self._frame: Optional[np.ndarray] = None  # last full-resolution (C, H, W) frame
        # Last observation, repeated once the episode is over (the engine has no state then).
        self._pixels = np.zeros(shape, np.uint8)
        self._measurements = np.zeros(self.n_measurements, np.float32)
        self._stats_at_start: dict = {}
        self._steps = 0
        self._untouched = True  # init() started an episode nobody has played yet
        self._step_reward = 0.0
        # The replay log (see the class's docstring): every reset's seed comes from here, and the current
        # episode's seed and actions.
        self._seed_root = int(seed) if seed is not None else int(np.random.SeedSequence().entropy % 2**63)
        self._episodes = 0  # resets so far
        self._episode_seed: Optional[int] = None
        self._actions: list = []

    # -- gymnasium API -------------------------------------------------------------

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is None and not self.multiplayer:
            seed = episode_seed(self._seed_root, self._episodes)
        self._episodes += 1
        self._episode_seed, self._actions = seed, []
        super().reset(seed=seed)
        if seed is not None:
            self.game.set_seed(to_vizdoom_seed(seed))
        # A network game starts its first match in init(); restarting it before anyone
        # moved desynchronizes the players (they then wait for each other forever).
        if not (self.multiplayer and self._untouched):
            self.game.new_episode()
        self._untouched = False
        if self.bots:
            self.game.send_game_command("removebots")
            for _ in range(self.bots):
                self.game.send_game_command("addbot")
        self._steps = 0
        self._stats_at_start = self._read_stats()
        if self.shaping is not None:
            self.shaping.start()
        self._observe()
        return self._obs(), {}

    def step(self, action):
        self._actions.append(action.copy() if isinstance(action, np.ndarray) else action)
        return self._conclude_step(self.game.make_action(self.actions.to_buttons(action), self.frameskip))

    def tic(self, action, last: bool):
        """One tic of a step, for network games with several of our players: their
        engines deadlock unless every player advances one tic at a time in lockstep
        (the caller, multiagent.py, is the metronome). `action` starts a step (None:
        keep it); the step's result comes with its `last` tic, None before."""
        game = self.game
        if action is not None:
            game.set_action(self.actions.to_buttons(action))
            self._step_reward = 0.0
        if not game.is_episode_finished():  # a match ends for all players at the same tic
            game.advance_action(1, True)
            self._step_reward += game.get_last_reward()
        return self._conclude_step(self._step_reward) if last else None

    def _conclude_step(self, reward: float):
        game = self.game
        self._steps += 1
        reward *= self.scenario_reward_scale
        if self.shaping is not None:
            reward += self.shaping()
        terminated = truncated = False
        info = {} if self.shaping is None else {SHAPING_UNITS: self.shaping.units}
        if game.is_episode_finished():
            # The state is None now: the observation stays the last frame seen.
            # Death ends a single-player episode; the scenario's own goal ends any.
            if not game.is_episode_timeout_reached() or (not self.multiplayer and game.is_player_dead()):
                terminated = True
            else:
                truncated = True
        else:
            self._observe()
            if self.max_episode_steps is not None and self._steps >= self.max_episode_steps:
                truncated = True
        if (terminated or truncated) and self.stat_variables:
            end = self._read_stats()
            info["episode_extra_stats"] = {k: end[k] - self._stats_at_start.get(k, 0.0) for k in end}
        return self._obs(), float(reward), terminated, truncated, info

    def render(self):
        """rgb_array: the last full-resolution frame, (H, W, 3) uint8."""
        if self.render_mode != "rgb_array" or self._frame is None:
            return None
        frame = self._frame
        if frame.shape[0] == 1:
            frame = np.repeat(frame, 3, axis=0)
        return np.ascontiguousarray(frame.transpose(1, 2, 0))

    def close(self):
        if not self._closed:
            self._closed = True
            self.game.close()

    # -- internals -----------------------------------------------------------------

    def _obs(self):
        if self.n_measurements:
            return {"obs": self._pixels, "measurements": self._measurements}
        return self._pixels

    def _observe(self) -> None:
        state = self.game.get_state()
        if state is None:  # not expected while the episode runs; keep the last observation
            return
        self._frame = as_chw(state.screen_buffer)
        self._pixels = downsample(self._frame, self.factor)
        if self.resize is not None:
            self._pixels = self.resize(self._pixels)
        if self.n_measurements:
            self._measurements = np.asarray(state.game_variables, np.float32)

    def _read_stats(self) -> dict:
        return {name: float(self.game.get_game_variable(var)) for name, var in self.stat_variables.items()}

    # -- pickling: the replay log ------------------------------------------------------

    def __getstate__(self):
        if self.multiplayer:
            raise TypeError("a ViZDoom network game (env.num_bots > 0) cannot be saved: its bots and host are "
                            "not replayed")
        return {"arguments": self._arguments, "seed_root": self._seed_root, "episodes": self._episodes,
                "episode_seed": self._episode_seed, "actions": list(self._actions),
                "digest": obs_digest(self._obs())}

    def __setstate__(self, state):
        self.__init__(**state["arguments"])
        self._seed_root = state["seed_root"]
        if state["episode_seed"] is not None:
            self.replay(state["episode_seed"], state["actions"], state["digest"])
        self._episodes = state["episodes"]

    def replay(self, seed: int, actions: Sequence, digest: Optional[str] = None) -> None:
        """Resets with `seed` and takes `actions`; with `digest` (obs_digest of the observation the saved env
        held), raises EnvReplayError unless the episode went on to its last action and ended on that
        observation."""
        obs, _ = self.reset(seed=seed)
        for n, action in enumerate(actions):
            obs, _, terminated, truncated, _ = self.step(action)
            if (terminated or truncated) and n + 1 < len(actions):
                self.close()
                raise EnvReplayError(f"replaying the saved ViZDoom episode ({self.scenario!r}, seed {seed}): it "
                                     f"ended at action {n + 1} of {len(actions)}; the game diverged from the one saved")
        if digest is not None and obs_digest(obs) != digest:
            self.close()
            raise EnvReplayError(f"replaying the saved ViZDoom episode ({self.scenario!r}, seed {seed}, "
                                 f"{len(actions)} actions) did not reproduce its last observation: the game "
                                 "diverged from the one saved (a nondeterministic engine setting, or an observed "
                                 "game variable that survives new_episode)")

    def __del__(self):
        # Best effort: a forgotten env must not leave a vizdoom process behind.
        try:
            self.close()
        except Exception:
            pass


class EnvReplayError(RuntimeError):
    """A saved DoomEnv's replay did not reproduce the saved game."""


def episode_seed(root: int, episode: int) -> int:
    """The seed of a DoomEnv's episode `episode` (0, 1, ...) when its reset names none: a 32-bit value of
    numpy's SeedSequence of (the env's seed, episode), so that every episode can be replayed from its seed."""
    return int(np.random.SeedSequence([int(root), int(episode)]).generate_state(1, np.uint32)[0])


def obs_digest(obs) -> str:
    """A hash of an observation (its arrays' bytes, dtypes and shapes; a dict's by key)."""
    h = hashlib.blake2b(digest_size=16)
    for key, value in sorted(obs.items()) if isinstance(obs, dict) else [("", obs)]:
        value = np.ascontiguousarray(value)
        h.update(f"{key}|{value.dtype}|{value.shape}|".encode())
        h.update(value.tobytes())
    return h.hexdigest()
