"""make_envs: a worker's envs, created together on threads where the family allows it (EnvFamily.concurrent_make),
one by one otherwise; the same envs either way, and a failure as creating them one by one would give."""

from __future__ import annotations

import threading

import pytest
from gymnasium.envs.classic_control import CartPoleEnv
from omegaconf import OmegaConf

from sf_hydra.envs import EnvFamily, make_env, make_envs

# Every env of one make_envs call waits here for its siblings: created one after another, the first one times out.
_BARRIER: dict = {}
CLOSED: list = []


class _Tracked(CartPoleEnv):
    def __init__(self, seed):
        super().__init__()
        self.seed_given, self.thread = seed, threading.current_thread().name
        self.reset(seed=seed)

    def close(self):
        CLOSED.append(self.seed_given)
        super().close()


class TogetherFamily(EnvFamily):
    """Each `make` waits until all of the call's envs are being made (a barrier), so only a concurrent start
    succeeds; seed 13 fails after the barrier."""

    def make(self, env_cfg, seed=None, render_mode=None):
        _BARRIER["now"].wait(timeout=5)
        if seed == 13:
            raise RuntimeError("env 13 cannot start")
        return _Tracked(seed)

    def concurrent_make(self, env_cfg):
        return True


class OneByOneFamily(EnvFamily):
    def make(self, env_cfg, seed=None, render_mode=None):
        return _Tracked(seed)


def env_node(family: str):
    return OmegaConf.create({"factory": {"_target_": f"{__name__}.{family}"}, "pixel_format": "CHW",
                             "episode_counter": False})


def test_a_family_that_allows_it_starts_its_envs_together_in_seed_order():
    _BARRIER["now"] = threading.Barrier(4)
    envs = make_envs(env_node("TogetherFamily"), [5, 6, 7, 8])
    assert [e.seed_given for e in envs] == [5, 6, 7, 8]
    assert len({e.thread for e in envs}) == 4 and threading.current_thread().name not in {e.thread for e in envs}
    for e in envs:
        e.close()


def test_a_family_that_does_not_say_so_gets_its_envs_one_by_one_on_the_calling_thread():
    envs = make_envs(env_node("OneByOneFamily"), [1, 2, 3])
    assert [e.seed_given for e in envs] == [1, 2, 3]
    assert {e.thread for e in envs} == {threading.current_thread().name}


def test_a_failed_env_closes_its_started_siblings_and_raises_its_error():
    _BARRIER["now"] = threading.Barrier(3)
    CLOSED.clear()
    with pytest.raises(RuntimeError, match="env 13 cannot start"):
        make_envs(env_node("TogetherFamily"), [12, 13, 14])
    assert sorted(CLOSED) == [12, 14]


def test_doom_single_player_games_start_together_and_equal_those_made_one_by_one(tmp_path, monkeypatch):
    pytest.importorskip("vizdoom", reason="the doom env family needs the vizdoom package (pip install vizdoom)")
    import numpy as np

    from sf_hydra.envs.doom.maps.build import CACHE_ENV
    from tests.envs.test_doom_env import doom_cfg

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "map_cache"))
    cfg = doom_cfg("basic")
    family = __import__("sf_hydra.envs", fromlist=["env_family"]).env_family(cfg)
    assert family.concurrent_make(cfg)
    assert not family.concurrent_make(doom_cfg("basic", num_bots=1))  # bot games probe UDP ports: one by one
    together = make_envs(cfg, [3, 4, 5])
    alone = [make_env(cfg, seed=s) for s in (3, 4, 5)]
    try:
        for a, b in zip(together, alone):
            obs_a, obs_b = a.reset(seed=9)[0], b.reset(seed=9)[0]
            np.testing.assert_array_equal(obs_a, obs_b)
            for action in (0, 1, 2, 1):
                np.testing.assert_array_equal(a.step(action)[0], b.step(action)[0])
    finally:
        for env in together + alone:
            env.close()
