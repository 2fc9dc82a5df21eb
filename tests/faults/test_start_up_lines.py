"""A start-up that takes long says what it waits for: the probe env's build, then the workers' first trajectory
(an env that takes seconds to build, as ViZDoom does on a loaded machine)."""

from __future__ import annotations

import pytest

from tests.faults.runs import train_py


@pytest.mark.slow
def test_a_slow_start_up_says_what_it_waits_for(tmp_path):
    proc = train_py(tmp_path, "env=gym/any", "env.id=tests.helpers.faulty_envs:SlowInitCartPole-v0",
                    "+env.kwargs.init_seconds=12", "hardware.use_env_info_cache=false", "train_for_env_steps=64",
                    timeout=180)
    assert proc.returncode == 0, proc.out[-3000:]
    lines = proc.out.splitlines()
    assert any("still building env" in line for line in lines), proc.out[-3000:]
    assert any("still waiting for the rollout workers to build their envs: 0 of 1 ready" in line for line in lines), \
        proc.out[-3000:]
