"""`env=atari/<game>` for every game of sf_hydra's game table, without a file per game.

A config source (scheme `sf-atari://`) serves `env/atari/<game>` as the config a game file
would hold: the Atari family's defaults plus the game's name and ROM id (and the few keys a
game needs, `sf_hydra.envs.atari.games.game_env_keys`). The search-path plugin adds the source
after the app's own config folder, so a real file `conf/env/atari/<game>.yaml` (a tuned
game: pong) wins over the generated config, and a user's `--config-dir` can shadow any game.

Only apps whose search path holds sf_hydra's config tree (a folder with
`env_family/atari.yaml`) get the source. The game table is read (importing ale_py) only when
Hydra asks about the `env/atari` group, never for other envs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import OmegaConf

SCHEME = "sf-atari"
GROUP = "env/atari"
MARKER = Path("env_family") / "atari.yaml"  # a config folder with this file is sf_hydra's tree


def _games() -> List[str]:
    from sf_hydra.envs.atari.games import available_game_ids  # Hydra loads plugins at start: ale_py only on demand

    return available_game_ids()


class AtariGamesSource(ConfigSource):
    """Read-only and stateless: every answer follows from the game table."""

    @staticmethod
    def scheme() -> str:
        return SCHEME

    @staticmethod
    def _game(config_path: str) -> Optional[str]:
        path = config_path.strip("/")
        path = path[: -len(".yaml")] if path.endswith(".yaml") else path
        prefix = GROUP + "/"
        return path[len(prefix):] if path.startswith(prefix) and "/" not in path[len(prefix):] else None

    def load_config(self, config_path: str) -> ConfigResult:
        game = self._game(config_path)
        if game is None or game not in _games():
            raise ConfigLoadError(f"Config not found: {config_path} (not an ALE game of sf_hydra's table)")
        from sf_hydra.envs.atari.games import game_env_keys  # as above: only once an atari game is asked for

        node = {"defaults": ["/env_family/atari", "_self_"],
                "env": {"name": f"atari_{game}", "id": game, **game_env_keys(game)}}
        return ConfigResult(config=OmegaConf.create(node), path=f"{SCHEME}://{self.path}", provider=self.provider,
                            header={"package": "_global_"})

    def available(self) -> bool:
        return True

    def is_group(self, config_path: str) -> bool:
        return config_path.strip("/") in ("", "env", GROUP)

    def is_config(self, config_path: str) -> bool:
        game = self._game(config_path)
        return game is not None and game in _games()

    def list(self, config_path: str, results_filter: Optional[ObjectType]) -> List[str]:
        path = config_path.strip("/")
        groups: Dict[str, str] = {"": "env", "env": "atari"}
        if path in groups:
            return [groups[path]] if results_filter in (None, ObjectType.GROUP) else []
        if path == GROUP and results_filter in (None, ObjectType.CONFIG):
            return _games()
        return []


class AtariGamesSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for element in search_path.get_path():
            folder = element.path[len("file://"):] if element.path.startswith("file://") else element.path
            if "://" not in folder and (Path(folder) / MARKER).is_file():
                search_path.append(provider="sf_hydra_atari", path=f"{SCHEME}://games")
                return
