"""Typed `env` node of the doom family (no vizdoom import: the schema must load without it)."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from sf_hydra.config.schema import EnvConfig

DOOM_TICRATE = 35  # engine tics per second


@dataclass
class DoomActionsConfig:
    """How agent actions map to ViZDoom buttons.

    groups empty: Discrete(1 + n), no-op or one of the scenario's own n buttons.
    groups given: Tuple of Discrete(1 + len(group)) per group (no-op or one button of the
    group; buttons of different groups combine), e.g. [[MOVE_FORWARD, MOVE_BACKWARD], [ATTACK]].
    turn_delta_bins > 0 adds TURN_LEFT_RIGHT_DELTA as one more Discrete(turn_delta_bins):
    turn speeds evenly spaced in [-turn_delta_max, turn_delta_max] degrees per tic.
    """

    # button groups, one Discrete(1 + len(group)) action each (empty: one Discrete over the scenario's buttons)
    groups: List[List[str]] = field(default_factory=list)
    turn_delta_bins: int = 0  # > 0: TURN_LEFT_RIGHT_DELTA as one more Discrete of this many turn speeds
    turn_delta_max: float = 10.0  # the fastest of those turns, degrees per tic


@dataclass
class DoomEnvConfig(EnvConfig):
    """ViZDoom: a scenario .cfg (shipped in vizdoom.scenarios_path, one of our generated
    battle maps, or a path to a .cfg file)."""

    family: str = "doom"
    resolution: str = "256x144"  # the engine's render resolution, WxH
    downsample: int = 2  # integer pooling of the rendered frame: 256x144 -> 128x72
    # [width, height]: then a nearest-neighbour resize to this size (Sample Factory's res_w, res_h: it
    # renders 160x120 and resizes to 128x72); null: the downsampled frame as it is
    resize: Optional[List[int]] = None
    grayscale: bool = False  # one gray channel instead of RGB
    episode_timeout: Optional[int] = None  # tics; None keeps the scenario's own
    actions: DoomActionsConfig = field(default_factory=DoomActionsConfig)  # how agent actions map to ViZDoom buttons
    # Game variables (HEALTH, AMMO2, ...) observed as a float vector: the observation is
    # then a Dict {"obs": pixels, "measurements": vector}. Empty: pixels only.
    measurements: List[str] = field(default_factory=list)
    # Game variables reported at the end of an episode in info["episode_extra_stats"] (kills, frags).
    episode_stats: List[str] = field(default_factory=list)
    # Rewards for changes of game variables, {VARIABLE: [per unit up, per unit down]}, e.g.
    # {FRAGCOUNT: [1.0, -1.5], DEATHCOUNT: [-0.75, 0.0]}; added to the scenario's own rewards.
    delta_rewards: Dict[str, List[float]] = field(default_factory=dict)
    # Weight of the scenario's own reward (its map scripts' and ViZDoom's built-in rewards);
    # 0 where delta_rewards alone should pay (a map whose script rewards every player alike).
    scenario_reward_scale: float = 1.0
    # Multiplayer (deathmatch rules, loopback network): num_agents > 1 is a multi-agent env
    # of our own players; num_bots built-in bots join the game.
    num_agents: int = 1
    num_bots: int = 0  # built-in bots that join a multiplayer game
    host_args: str = ""  # engine args of the hosting player (game rules: "+sv_forcerespawn 1 ...")
    connect_timeout_sec: float = 30.0  # a host/join set-up not running by then is retried on fresh ports
    connect_attempts: int = 3  # tries of a multiplayer set-up before it is an error
    step_timeout_sec: float = 60.0  # a multiplayer game that does not answer by then is restarted
