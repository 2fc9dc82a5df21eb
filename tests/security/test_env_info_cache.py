"""hardware.use_env_info_cache (the user's cache folder): the env's spaces are cached as JSON, never as a pickle.
A pickle where the old cache lived is never loaded; a cache file that does not parse or describes nonsense is
ignored and rebuilt from one env build, never a crash."""

import json
import pathlib
import pickle

import pytest

from sf_hydra.sampler.env_info import describe_env, env_info, env_info_cache_file
from tests.conftest import make_cfg
from tests.helpers.probe_envs import read_log

PROBE = ("env=gym/any", "env.id=tests.helpers.probe_envs:ProbeCartPole-v0", "hardware.use_env_info_cache=true")


class _Touch:
    """Unpickled, it creates `marker`: what a hostile cache file would run."""

    def __init__(self, marker):
        self.marker = pathlib.Path(marker)

    def __reduce__(self):
        return pathlib.Path.touch, (self.marker,)


def _cfg(tmp_path):
    return make_cfg(tmp_path, *PROBE, f"+env.kwargs.log_dir={tmp_path}")


def _builds(tmp_path) -> int:
    return sum(e["event"] == "built" for e in read_log(tmp_path))


def test_a_pickle_where_the_old_cache_lived_is_never_loaded(tmp_path):
    cfg = _cfg(tmp_path)
    marker = tmp_path / "marker"
    old = env_info_cache_file(cfg).with_suffix(".pkl")
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_bytes(pickle.dumps(_Touch(marker)))
    info = env_info(cfg)
    assert not marker.exists(), "the old .pkl cache was unpickled"
    assert info == describe_env(cfg.env)
    assert _builds(tmp_path) == 2  # this start's probe env and describe_env's above: the pickle was ignored
    assert json.loads(env_info_cache_file(cfg).read_text())["observation"]["type"] == "Box"
    assert env_info(cfg) == info and _builds(tmp_path) == 2  # the JSON cache serves the next start
    assert not marker.exists()


def _edited(edit):
    """The valid cache, edited by `edit` (a function of the parsed file that changes it in place)."""
    def content(valid: dict) -> bytes:
        edit(valid)
        return json.dumps(valid).encode()
    return content


NONSENSE = {
    "truncated": lambda valid: json.dumps(valid).encode()[:40],
    "not_utf8": lambda valid: b"\xff\xfe\x00garbage",
    "a_list": lambda valid: b"[1, 2, 3]",
    "unknown_space": _edited(lambda c: c["action"].update(type="Graph")),
    "negative_n": _edited(lambda c: c["action"].update(n=-4)),
    "bad_shape": _edited(lambda c: c["observation"].update(shape=["x"])),
    "agents_a_string": _edited(lambda c: c.update(num_agents="two")),
    "another_env": _edited(lambda c: c["env"].update(id="CartPole-v1")),
    "no_env": _edited(lambda c: c.pop("env")),
}


@pytest.mark.parametrize("content", NONSENSE.values(), ids=NONSENSE.keys())
def test_a_cache_that_does_not_parse_or_describes_nonsense_is_rebuilt(tmp_path, content):
    cfg = _cfg(tmp_path)
    info = env_info(cfg)
    path = env_info_cache_file(cfg)
    path.write_bytes(content(json.loads(path.read_text())))
    assert env_info(cfg) == info
    assert _builds(tmp_path) == 2, "the env was not built again"
    assert env_info(cfg) == info and _builds(tmp_path) == 2, "the rebuilt cache did not serve the next start"
