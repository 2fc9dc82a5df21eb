"""Doom env tests build battle maps into a per-test cache folder, not the user's cache."""

import pytest


@pytest.fixture(autouse=True)
def private_map_cache(tmp_path, monkeypatch):
    from sf_hydra.envs.doom.maps.build import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "map_cache"))
    return tmp_path / "map_cache"
