"""Sample Factory's `--env` names -> our env configs (`env=<family>/<name>`), and back.

The names are derived, not listed by hand, so a new config file is mapped at once:

- `doom_<x>` -> `doom/<x>` and `mujoco_<x>` -> `mujoco/<x>` for every such file in conf/env;
- `dmlab_<x>` -> `dmlab/dmlab_<x>` (our files keep the prefix);
- `atari_<game>` -> `atari/<game>`: Sample Factory drops the underscores of a game's name
  (atari_spaceinvaders), ale_py keeps them (space_invaders), so the two are compared squashed;
- a gymnasium id (train_gym_env: CartPole-v1) -> the gym config with that `env.id`, else
  `env=gym/any env.id=<id>`;
- IRREGULAR: the few names the rules above miss.

Any other name is refused, naming it, with the closest names that are mapped.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional

import yaml

from sf_hydra.core.errors import ConfigError

IRREGULAR = {  # Sample Factory's name -> ours, where the prefix rules do not find it
    "mujoco_walker": "mujoco/walker2d",
    "atari_montezuma": "atari/montezuma_revenge",
    "atari_asteroid": "atari/asteroids",
}
# Other Sample Factory names for a config that has its own (1.x's README and the paper): read, never written.
ALIASES = {
    "doom_benchmark": "doom/battle",  # 1.x's throughput benchmark plays battle (experiments/doom_benchmark_*)
    "doom_deathmatch_full": "doom/deathmatch",  # the paper's deathmatch self-play (experiments/doom_deathmatch_*)
}
PREFIXED = ("doom", "mujoco")  # <family>_<x> -> <family>/<x>
GYM_ID = re.compile(r"^([\w.]+:)?[\w./-]+-v\d+$")  # CartPole-v1, ALE/Pong-v5, module:Env-v0
ANY_GYM = "gym/any"


def _squash(name: str) -> str:
    return name.replace("_", "").lower()


@lru_cache(maxsize=None)
def _env_files(conf_dir: str) -> Dict[str, Optional[str]]:
    """{config name: its env.id (None if the file sets none)} for conf/env/**.yaml."""
    root = Path(conf_dir) / "env"
    out = {}
    for path in sorted(root.rglob("*.yaml")):
        node = yaml.safe_load(path.read_text()) or {}
        env = node.get("env") if isinstance(node.get("env"), dict) else {}
        out[str(path.relative_to(root).with_suffix(""))] = env.get("id")
    return out


@lru_cache(maxsize=None)
def _atari_games() -> tuple:
    from sf_hydra.envs.atari.games import available_game_ids  # ale_py and sf_hydra.envs (gymnasium): only when asked

    return tuple(available_game_ids())


def sf_env_names(conf_dir: str, with_atari: bool = True) -> Dict[str, str]:
    """{Sample Factory name: our config} for every name this module maps (gym ids: the
    ones with a config file; any other registered id goes to gym/any)."""
    files = _env_files(conf_dir)
    names = {}
    for config, env_id in files.items():
        family, _, rest = config.partition("/")
        if family in PREFIXED:
            names[f"{family}_{rest}"] = config
        elif family == "dmlab":
            names[rest if rest.startswith("dmlab_") else f"dmlab_{rest}"] = config
        elif family == "gym" and env_id and GYM_ID.match(str(env_id)):
            names[str(env_id)] = config
    games = set(_atari_games()) if with_atari else set()
    games |= {c.partition("/")[2] for c in files if c.startswith("atari/")}
    names.update({f"atari_{_squash(g)}": f"atari/{g}" for g in sorted(games)})
    irregular = {k: v for k, v in IRREGULAR.items() if v in files or v.partition("/")[2] in games}
    names = {k: v for k, v in names.items() if v not in irregular.values()}  # Sample Factory's name only
    return dict(sorted({**names, **irregular}.items()))


def to_config(name: str, conf_dir: str) -> Dict[str, str]:
    """Our overrides for Sample Factory's `--env=<name>`: {"env": config} (+ "env.id" for gym/any)."""
    names = sf_env_names(conf_dir, with_atari=name.startswith("atari_"))
    if name in names:
        return {"env": names[name]}
    if name in ALIASES and ALIASES[name] in _env_files(conf_dir):
        return {"env": ALIASES[name]}
    if GYM_ID.match(name) and not name.startswith(("doom_", "atari_", "mujoco_", "dmlab_")):
        _check_gym_id(name)
        return {"env": ANY_GYM, "env.id": name}
    known = list(sf_env_names(conf_dir))
    close = difflib.get_close_matches(name, known, n=8, cutoff=0.6)
    family = [k for k in known if k.split("_")[0] == name.split("_")[0]][:10]
    hint = f"close matches: {close}" if close else f"no close match; mapped {name.split('_')[0]}_*: {family}" \
        if family else "no close match"
    raise ConfigError("--env", name, f"a Sample Factory env name we have a config for ({hint}; "
                      "the list: docs/parameters.md, or name ours: env=<family>/<name>)")


def _check_gym_id(name: str) -> None:
    """A plain gymnasium id must be registered (module:Id ids register on import: not checked)."""
    if ":" in name:
        return
    try:
        import gymnasium  # only for a gym id: its ~0.2 s stay off every other command line
    except ImportError:
        return
    registered = list(gymnasium.envs.registry)
    if name not in registered:
        close = difflib.get_close_matches(name, registered, n=8, cutoff=0.6)
        raise ConfigError("--env", name, f"a registered gymnasium id (close matches: {close})")


def to_sf(config: str, env_id: Optional[str], conf_dir: str) -> str:
    """Sample Factory's name for our env config (gym/any: its env.id)."""
    if config == ANY_GYM:
        return str(env_id)
    names = sf_env_names(conf_dir, with_atari=config.startswith("atari/"))
    reverse = {ours: sf_name for sf_name, ours in names.items()}
    if config in reverse:
        return reverse[config]
    raise ConfigError("env", config, "an env config Sample Factory has a name for")


def mapped_table(conf_dir: str) -> List[tuple]:
    """[(Sample Factory name, our config)] for the docs, ALIASES included."""
    aliases = [(k, v) for k, v in ALIASES.items() if v in _env_files(conf_dir)]
    return sorted(list(sf_env_names(conf_dir).items()) + aliases)
