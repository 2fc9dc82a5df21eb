"""Start-up that never looks hung: the env's spaces are cached by default (keyed by the env node and the env code's
files, so an edit of the env is another cache file), and a start-up step that lasts says what it is doing."""

from __future__ import annotations

import logging
import sys
import textwrap
import time

from sf_hydra.core.clock import said_while_slow
from sf_hydra.sampler.env_info import env_info, env_info_cache_file
from tests.conftest import make_cfg
from tests.helpers.probe_envs import read_log

FAMILY = '''
from gymnasium.envs.classic_control import CartPoleEnv
from sf_hydra.envs import EnvFamily


class StampFamily(EnvFamily):
    def make(self, env_cfg, seed=None, render_mode=None):
        env = CartPoleEnv()
        env.reset(seed=seed)
        return env
'''


def test_a_second_start_builds_no_env_by_default(tmp_path):
    cfg = make_cfg(tmp_path, "env=gym/any", "env.id=tests.helpers.probe_envs:ProbeCartPole-v0",
                   f"+env.kwargs.log_dir={tmp_path}")
    assert cfg.hardware.use_env_info_cache
    first = env_info(cfg)
    assert env_info(cfg) == first
    assert sum(e["event"] == "built" for e in read_log(tmp_path)) == 1


def test_an_edit_of_the_env_code_is_another_cache_file(tmp_path, monkeypatch):
    package = tmp_path / "stamp_envs"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "family.py").write_text(textwrap.dedent(FAMILY))
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = make_cfg(tmp_path, "env=gym/any", "env.id=CartPole-v1", "env.factory._target_=stamp_envs.family.StampFamily")
    before = env_info_cache_file(cfg)
    assert env_info_cache_file(cfg) == before  # the same files: the same entry
    time.sleep(0.01)
    (package / "family.py").write_text(textwrap.dedent(FAMILY) + "# edited\n")
    assert env_info_cache_file(cfg) != before
    sys.modules.pop("stamp_envs.family", None)


def test_a_slow_step_says_what_it_is_doing(caplog):
    log = logging.getLogger("sf_hydra.test")
    with caplog.at_level(logging.INFO, logger="sf_hydra.test"):
        with said_while_slow("building env doom_basic to read its spaces", log, after_sec=0.2, every_sec=0.2):
            time.sleep(0.75)
        time.sleep(0.3)  # nothing is said once the step ended
        lines = [r.getMessage() for r in caplog.records]
        with said_while_slow("a quick step", log, after_sec=0.5, every_sec=0.5):
            pass
        time.sleep(0.6)
    assert 2 <= len(lines) <= 4 and all(m.startswith("still building env doom_basic") for m in lines), lines
    assert not any("quick" in r.getMessage() for r in caplog.records)
