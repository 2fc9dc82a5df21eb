"""A custom env whose observation changes shape mid-episode (it declares 4 values and returns 7 from its fifth
step on) stops the run with one message naming the env id, the step, the declared space and what the env
returned, instead of numpy's broadcast error inside a worker's traceback."""

import pytest

from tests.faults.runs import train_py

ENV = ("env=gym/any", "env.id=tests.helpers.broken_space_envs:GrowingObsCartPole-v0")


@pytest.mark.slow
def test_an_observation_of_another_shape_is_named_with_env_step_space_and_shape(tmp_path):
    proc = train_py(tmp_path, *ENV, "+env.kwargs.at=5", "+env.kwargs.size=7",
                    "hardware.decorrelate_envs_on_one_worker=false")  # no random start steps: the fifth step is it
    out = proc.out
    assert proc.returncode == 1, out[-3000:]
    assert "env 'tests.helpers.broken_space_envs:GrowingObsCartPole-v0' (rollout worker 0, env " in out, out[-3000:]
    assert "returned an observation of shape (7,), dtype float32 at step 5 of its episode" in out, out[-3000:]
    assert "its declared observation space is Box of shape (4,), dtype float32" in out, out[-3000:]
    assert "could not broadcast" not in out and "Traceback" not in out, out[-3000:]


@pytest.mark.slow
def test_during_its_random_start_steps_it_is_named_so(tmp_path):
    proc = train_py(tmp_path, *ENV, "+env.kwargs.at=5", "hardware.decorrelate_envs_on_one_worker=true")
    out = proc.out
    assert proc.returncode == 1, out[-3000:]
    assert "returned an observation of shape (7,), dtype float32 at its first reset or one of its random start " \
        "steps (hardware.decorrelate_envs_on_one_worker)" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
