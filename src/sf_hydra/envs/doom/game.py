"""Scenario lookup and `DoomGame` set-up (headless, PLAYER mode, our screen settings)."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

import vizdoom as vzd

from sf_hydra.core.errors import ConfigError
from sf_hydra.envs.doom.maps.build import BATTLE_SPECS, build_scenario

# Shipped .cfg files made for multiplayer games (deathmatch maps, CIG competition set-up).
# Their `init()` segfaults (vizdoom 1.3.2) unless the engine hosts a game, e.g. with
# game args "-host 1 -deathmatch"; the family refuses them without such args.
MULTIPLAYER_SCENARIOS = frozenset({"cig", "multi", "multi_duel"})
MULTIPLAYER_HINT = "-host 1 -deathmatch"

# Doom 1 IWADs name their maps ExMy: the default map01 does not exist there and
# new_episode() then hangs forever (vizdoom 1.3.2, freedoom1.cfg / doom.cfg as shipped).
DOOM1_IWADS = frozenset({"doom.wad", "doom1.wad", "freedoom1.wad"})


def shipped_scenarios() -> list:
    """Names of the scenario .cfg files shipped in the vizdoom wheel."""
    return sorted(f[: -len(".cfg")] for f in os.listdir(vzd.scenarios_path) if f.endswith(".cfg"))


def known_scenarios() -> list:
    """Shipped scenarios and our generated battle maps."""
    return sorted(shipped_scenarios() + list(BATTLE_SPECS))


def single_player_scenarios() -> list:
    return [s for s in known_scenarios() if s not in MULTIPLAYER_SCENARIOS]


def resolve_scenario(scenario: str) -> str:
    """A scenario name (`basic`, `battle`) or a path to an existing .cfg -> the .cfg path.
    Battle maps are built on first use (see maps/build.py)."""
    if scenario.endswith(".cfg") and os.path.isfile(scenario):
        return os.path.abspath(scenario)
    if scenario in BATTLE_SPECS:
        return str(build_scenario(scenario))
    path = os.path.join(vzd.scenarios_path, scenario + ".cfg")
    if os.path.isfile(path):
        return path
    raise ConfigError(
        "env.id", scenario, f"known ViZDoom scenarios are {known_scenarios()} (or give a path to an existing .cfg file)"
    )


def _enum_member(enum, name: str, key: str):
    value = getattr(enum, str(name).strip().upper(), None)
    if not isinstance(value, enum):
        allowed = sorted(n for n in dir(enum) if not n.startswith("_") and isinstance(getattr(enum, n), enum))
        raise ConfigError(key, name, f"ViZDoom's {enum.__name__} names: {allowed}")
    return value


def parse_buttons(names: Sequence[str], key: str = "env.actions.groups") -> list:
    return [_enum_member(vzd.Button, n, key) for n in names]


def parse_game_variables(names: Sequence[str], key: str = "env.measurements") -> list:
    return [_enum_member(vzd.GameVariable, n, key) for n in names]


def parse_resolution(resolution: str):
    """'256x144' -> vizdoom.ScreenResolution.RES_256X144."""
    name = "RES_" + str(resolution).strip().upper()
    value = getattr(vzd.ScreenResolution, name, None)
    if value is None:
        allowed = sorted(n[4:].lower() for n in dir(vzd.ScreenResolution) if n.startswith("RES_"))
        raise ConfigError("env.resolution", resolution, f"ViZDoom resolutions are {allowed}")
    return value


# Settings with their own config key: the observation space is derived from those.
_OWN_KEYS = {"screen_format": "grayscale", "screen_resolution": "resolution", "episode_timeout": "episode_timeout"}

# kwargs whose string values name a member of a vizdoom enum.
_ENUM_SETTINGS = {
    "mode": vzd.Mode,
    "automap_mode": vzd.AutomapMode,
}


def apply_settings(game: vzd.DoomGame, settings: Mapping[str, Any]) -> None:
    """Extra DoomGame settings from `env.kwargs`: {doom_skill: 3} calls game.set_doom_skill(3).

    `game_args` appends engine arguments (game.add_game_args); enum settings take the
    member name ({mode: ASYNC_PLAYER}).
    """
    for key, value in settings.items():
        if key in _OWN_KEYS:
            raise ConfigError(f"env.kwargs.{key}", value,
                              f"set env.{_OWN_KEYS[key]} instead (the observation space follows it)")
        if key == "game_args":
            game.add_game_args(str(value))
            continue
        setter = getattr(game, "set_" + key, None)
        if setter is None:
            allowed = sorted(n[4:] for n in dir(game) if n.startswith("set_")) + ["game_args"]
            raise ConfigError(f"env.kwargs.{key}", value, f"DoomGame settings are {allowed}")
        if key in _ENUM_SETTINGS and isinstance(value, str):
            value = getattr(_ENUM_SETTINGS[key], value.upper())
        setter(value)


def build_game(
    scenario: str,
    resolution: str = "256x144",
    grayscale: bool = False,
    episode_timeout: Optional[int] = None,
    seed: Optional[int] = None,
    settings: Optional[Mapping[str, Any]] = None,
    buttons: Optional[Sequence] = None,
    game_variables: Optional[Sequence] = None,
    network_args: str = "",
) -> vzd.DoomGame:
    """Load the scenario, make it headless and synchronous, set the screen, init it.

    buttons / game_variables: what the game makes available (None keeps the .cfg's);
    network_args: engine args that host or join a multiplayer game.
    """
    cfg_path = resolve_scenario(scenario)
    all_args = f"{(settings or {}).get('game_args', '')} {network_args}"
    if scenario in MULTIPLAYER_SCENARIOS and "-host" not in all_args and "-join" not in all_args:
        raise ConfigError(
            "env.id",
            scenario,
            f"a single-player scenario ({single_player_scenarios()}); {scenario!r} is a multiplayer map whose engine "
            f"crashes unless it hosts a game: to play it alone set env.kwargs.game_args='{MULTIPLAYER_HINT}'",
        )
    game = vzd.DoomGame()
    game.load_config(cfg_path)
    if os.path.basename(game.get_doom_game_path()).lower() in DOOM1_IWADS and game.get_doom_map().lower() == "map01":
        game.set_doom_map("E1M1")
    game.set_window_visible(False)  # no display in workers: a visible window segfaults
    game.set_mode(vzd.Mode.PLAYER)  # synchronous: the engine waits for our action
    game.set_screen_resolution(parse_resolution(resolution))
    # CRCGCB is channel-first RGB, so frames need no transpose; GRAY8 is (H, W).
    game.set_screen_format(vzd.ScreenFormat.GRAY8 if grayscale else vzd.ScreenFormat.CRCGCB)
    # Only the screen is observed: skip the buffers some .cfg files switch on.
    game.set_audio_buffer_enabled(False)
    game.set_automap_buffer_enabled(False)
    game.set_depth_buffer_enabled(False)
    game.set_labels_buffer_enabled(False)
    game.set_sound_enabled(False)
    game.set_console_enabled(False)
    if episode_timeout is not None:
        game.set_episode_timeout(int(episode_timeout))
    if buttons is not None:
        game.set_available_buttons(list(buttons))
    if game_variables is not None:
        game.set_available_game_variables(list(game_variables))
    if network_args:
        game.add_game_args(network_args)
    if settings:
        apply_settings(game, settings)
    if seed is not None:
        game.set_seed(to_vizdoom_seed(seed))
    try:
        game.init()
    except Exception as e:  # vizdoom's own exceptions name neither the scenario nor the config key
        game.close()
        raise RuntimeError(f"ViZDoom could not start env.id={scenario!r} ({cfg_path}): {type(e).__name__}: {e}") from e
    return game


def to_vizdoom_seed(seed: int) -> int:
    return int(seed) % (2**32)  # DoomGame.set_seed takes an unsigned 32-bit int
