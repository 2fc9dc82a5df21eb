"""Every env config under conf/env steps through the real sampler: composed as shipped (a
small model and short rollouts on top), its real env built by the rollout worker, a few
hundred transitions written to the shared buffers and read back. The sampler runs in
serial mode (the same worker code, in this process) so each config costs seconds.

Atari's game configs (served from the game table, pong's from its tuned file) differ only
by ROM: two run here, and every game's env is built and stepped in tests/envs/test_atari_env.py.
dmlab cannot be installed here; its config must fail with a clear error (tests/experiments)."""

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from tests.conftest import CONF_DIR, make_cfg
from tests.sampler.collect import collect

FAMILY_EXTRAS = {"doom": "vizdoom", "mujoco": "mujoco", "atari": "ale_py", "gym": None}
CONFIG_EXTRAS = {"gym/lunar_lander": "Box2D", "gym/pettingzoo_kaz": "pettingzoo.butterfly"}  # beyond the family's
ATARI_SAMPLE = ("pong", "breakout")
# Extra overrides a config needs to run without anything else.
NEEDS = {"gym/any": ("env.id=MountainCar-v0",)}
SMALL = ("model.rnn_size=32", "model.encoder_conv_mlp_layers=[32]", "model.encoder_mlp_layers=[32]",
         "model.decoder_mlp_layers=[]")
MIN_SLOTS = 24  # x rollout 16 = 384 transitions


def env_configs():
    names = []
    for family in sorted(FAMILY_EXTRAS):
        if family == "atari":  # most games have no file: hydra_plugins/sf_hydra_plugins/atari_games.py serves them
            names += [f"atari/{game}" for game in ATARI_SAMPLE]
        else:
            names += [f"{family}/{p.stem}" for p in sorted(Path(CONF_DIR, "env", family).glob("*.yaml"))]
    return names


def sampler_cfg(tmp_path, name: str):
    return make_cfg(
        tmp_path, f"env={name}", *NEEDS.get(name, ()), *SMALL, "hardware.serial_mode=true", "hardware.num_workers=1",
        "hardware.num_envs_per_worker=2", "hardware.worker_num_splits=1", "hardware.batched_sampling=false",
        "algo.async_rl=true", "algo.rollout=16", "algo.recurrence=-1", "algo.batch_size=32",
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", env_configs())
def test_config_steps_through_the_sampler(tmp_path, monkeypatch, name):
    for extra in (FAMILY_EXTRAS[name.split("/")[0]], CONFIG_EXTRAS.get(name)):
        if extra:
            pytest.importorskip(extra, reason=f"{name} needs {extra}")
    if name.startswith("doom/"):
        from sf_hydra.envs.doom.maps.build import CACHE_ENV

        monkeypatch.setenv(CACHE_ENV, str(tmp_path / "maps"))  # battle maps built into this test's folder
    cfg = sampler_cfg(tmp_path, name)
    got = collect(cfg, min_slots=MIN_SLOTS, timeout=120.0)
    rows = got.batch["actions"]
    assert rows.shape[0] >= MIN_SLOTS and rows.shape[1] == 16
    assert got.frames >= MIN_SLOTS * 16 * cfg.env.frameskip  # frames: every agent's steps x frameskip
    for key, value in got.batch.items():
        if value.is_floating_point():
            assert torch.isfinite(value).all(), key
    assert any(k.startswith("obs.") for k in got.batch)
    # Every recorded action is one the env's action space allows.
    from sf_hydra.sampler.env_info import describe_env

    space = describe_env(cfg.env, seed=0).action_space
    sample = rows.reshape(-1, *rows.shape[2:]).numpy()
    if isinstance(space, gym.spaces.Discrete):
        assert ((sample >= 0) & (sample < space.n)).all()
    elif isinstance(space, gym.spaces.Box):
        assert np.isfinite(sample).all()
    else:  # MultiDiscrete / Tuple of Discrete, flattened
        nvec = [s.n for s in space.spaces] if isinstance(space, gym.spaces.Tuple) else list(space.nvec)
        assert ((sample >= 0) & (sample < np.array(nvec))).all()
