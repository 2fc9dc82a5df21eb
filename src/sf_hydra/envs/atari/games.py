"""Which ALE games exist (the ROMs ale_py ships) and the check of an `atari` env node."""

from __future__ import annotations

import difflib
import re
from typing import Tuple

import gymnasium as gym

from sf_hydra.core.errors import ConfigError


def game_ids() -> list:
    """Single-player ROM ids in ale_py's spelling (`pong`, `space_invaders`, ...): the games
    ale_py registers as `ALE/<Name>-v5`. It also ships four multi-player-only ROMs (combat,
    joust, maze_craze, warlords) that a single agent cannot play: loading one exits the process."""
    import ale_py  # noqa: F401  (registers the ALE/* ids; the optional `atari` extra, absent: no games)

    return sorted({spec.kwargs["game"] for name, spec in gym.registry.items()
                   if name.startswith("ALE/") and name.endswith("-v5")})


# Keys a game's config sets beyond the family's defaults (conf/env_family/atari.yaml), served
# with `env=atari/<game>` by hydra_plugins/sf_hydra_plugins/atari_games.py. A tuned game has
# its own file instead (conf/env/atari/<game>.yaml), which wins over the served config.
NO_NOOP = {"noop_max": 0}  # the game's minimal action set has no NOOP to wait with at reset
GAME_ENV_KEYS = {"backgammon": NO_NOOP, "video_checkers": NO_NOOP}


def game_env_keys(game: str) -> dict:
    """The `env.*` keys a game's served config sets beyond its name and ROM id (a copy)."""
    return dict(GAME_ENV_KEYS.get(game, {}))


def available_game_ids() -> list:
    """game_ids(), or [] without ale_py (the atari extra): then no game config is served and
    `env=atari/<game>` finds only real files."""
    try:
        return game_ids()
    except ImportError:
        return []


def multiplayer_only_ids() -> list:
    from ale_py import roms  # the optional `atari` extra, as in game_ids

    return sorted(set(roms.get_all_rom_ids()) - set(game_ids()))


def action_meanings(game: str, full_action_space: bool = False) -> list:
    from ale_py.env import AtariEnv  # the optional `atari` extra, as in game_ids

    env = AtariEnv(game=game, obs_type="ram", frameskip=1, full_action_space=full_action_space)
    try:
        return env.get_action_meanings()
    finally:
        env.close()


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def close_games(name: str, n: int = 5) -> list:
    """Close ROM ids, also for gymnasium-style spellings (`SpaceInvaders`, `ALE/Pong-v5`)."""
    ids = game_ids()
    squashed = {_squash(g): g for g in ids}
    base = _squash(re.sub(r"^ALE/|(NoFrameskip)?-v\d+$", "", name))
    exact = [squashed[base]] if base in squashed else []
    fuzzy = [squashed[s] for s in difflib.get_close_matches(base, list(squashed), n=n, cutoff=0.6)]
    return list(dict.fromkeys(exact + fuzzy))[:n]


def check_game(name: str) -> None:
    if name in game_ids():
        return
    if name in multiplayer_only_ids():
        raise ConfigError("env.id", name, f"a single-player ALE game: ale_py ships {name!r} as a multi-player-only ROM")
    close = close_games(name)
    hint = f"close matches: {close}" if close else f"e.g. pong, breakout, space_invaders ({len(game_ids())} games)"
    raise ConfigError("env.id", name, f"an ALE game id as ale_py spells it ({hint}); each has a config: env=atari/<id>")


def parse_resolution(text: str) -> Tuple[int, int]:
    """'84x84' -> (84, 84) as (width, height)."""
    match = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", str(text))
    if not match or min(int(match[1]), int(match[2])) < 1:
        raise ConfigError("env.resolution", text, "WxH with positive integers, e.g. 84x84")
    return int(match[1]), int(match[2])


def check_env_config(env_cfg) -> None:
    """Everything the atari factory needs, checked before any process starts."""
    check_game(env_cfg.id)
    parse_resolution(env_cfg.resolution)
    if not env_cfg.noop_max >= 0:
        raise ConfigError("env.noop_max", env_cfg.noop_max, "an integer >= 0 (0: no random no-ops at reset)")
    if env_cfg.noop_max > 0 and "NOOP" not in action_meanings(env_cfg.id, env_cfg.full_action_space)[:1]:
        raise ConfigError("env.noop_max", env_cfg.noop_max, f"0 for {env_cfg.id!r}: its minimal action set has no NOOP "
                          "to wait with at reset (or env.full_action_space=true)")
    if not env_cfg.frame_stack >= 1:
        raise ConfigError("env.frame_stack", env_cfg.frame_stack, "an integer >= 1")
    if not 0.0 <= env_cfg.repeat_action_probability <= 1.0:
        raise ConfigError("env.repeat_action_probability", env_cfg.repeat_action_probability, "a probability in [0, 1]")
    if env_cfg.max_episode_frames is not None and not env_cfg.max_episode_frames >= 1:
        raise ConfigError("env.max_episode_frames", env_cfg.max_episode_frames, "an integer >= 1, or null for no cap")
