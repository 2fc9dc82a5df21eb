"""Shared helpers for composing the real `conf/` tree in tests.

Two ways to get a config, both returning the composed (unvalidated) DictConfig:

    from tests.conftest import compose_cfg, make_cfg

    cfg = compose_cfg("env=doom/basic", "algo=ppo")      # exactly what `train.py ...` composes
    cfg = make_cfg(tmp_path, "algo.num_epochs=2")        # + run folder in tmp_path, small/fast settings

or, as fixtures:

    def test_something(compose_cfg, tmp_cfg):
        cfg = compose_cfg("model=conv_gru")
        cfg = tmp_cfg("algo=ppo", "train_for_env_steps=2048")

Overrides use Hydra's command-line syntax and are applied after the fast settings, so any
of those can be overridden again. Hydra's global state is cleared before and after every
composition, so tests can compose as often as they like in any order.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import tempfile
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from sf_hydra.config import register_configs
from sf_hydra.config.aliases import apply_aliases

# The user's seal key (sf_hydra.core.seal) of this test process and the processes it starts: a folder of the
# session's own, so that tests never read or make the key of the user who runs them.
os.environ.setdefault("SF_HYDRA_HOME", tempfile.mkdtemp(prefix="sf_hydra_home_"))
# ... and the cache sf_hydra keeps (the env spaces' cache): the session's own, not the user's.
os.environ.setdefault("SF_HYDRA_CACHE", tempfile.mkdtemp(prefix="sf_hydra_cache_"))

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"

# Small settings for quick end-to-end runs on a 2-core box. They satisfy every sampling rule
# in validation.py for the default env, env=doom/basic (recurrence = rollout = 16) and
# algo=ppo (one sampling round = 2 x 4 x 16 = 128 transitions = one iteration).
FAST_OVERRIDES = (
    "hardware.num_workers=2",
    "hardware.num_envs_per_worker=4",
    "algo.rollout=16",
    "algo.batch_size=128",
    "algo.num_batches_per_epoch=1",
    "logger.log_interval_sec=1",
    "logger.experiment_summaries_interval=1",
)


@functools.lru_cache(maxsize=None)
def _register_configs_once() -> None:
    """register_configs, once per test process: Hydra's ConfigStore and OmegaConf's resolvers are
    process-wide and no test unregisters them (each call stores every schema node again, ~0.1 s)."""
    register_configs()


def _compose(overrides: tuple) -> DictConfig:
    _register_configs_once()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose("train", overrides=apply_aliases(overrides))
    finally:
        GlobalHydra.instance().clear()


_composed = functools.lru_cache(maxsize=256)(_compose)


def compose_cfg(*overrides: str) -> DictConfig:
    """Compose `train` from the repo's conf/ with Hydra command-line style overrides. A composition is
    kept per test process (conf/ does not change while the tests run; a refused one is not kept) and
    each caller gets its own deep copy: the doom configs, the presets and the default config are
    composed by many tests (~0.2-0.3 s each time on a 2-core box)."""
    return copy.deepcopy(_composed(tuple(overrides)))


def _quote(value) -> str:
    """A quoted Hydra override value that keeps a path as is (spaces, commas, quotes, `${`).
    In Hydra's quoted strings only a quote, the backslashes before it or before the closing
    quote, and `${` are special."""
    text = re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), str(value))
    return "'" + text.replace("${", "\\${") + "'"


def make_cfg(tmp_path, *overrides: str) -> DictConfig:
    """`compose_cfg` with train_dir=<tmp_path>, experiment=test and FAST_OVERRIDES, then `overrides`.
    The run folder is therefore <tmp_path>/test."""
    return _compose((f"train_dir={_quote(tmp_path)}", "experiment=test", *FAST_OVERRIDES, *overrides))  # one per test


@pytest.fixture(name="compose_cfg")
def compose_cfg_fixture():
    """The `compose_cfg(*overrides)` function, as a fixture."""
    return compose_cfg


@pytest.fixture
def tmp_cfg(tmp_path):
    """A factory: `tmp_cfg(*overrides)` == `make_cfg(tmp_path, *overrides)`."""

    def factory(*overrides: str) -> DictConfig:
        return make_cfg(tmp_path, *overrides)

    return factory


@pytest.fixture(scope="session")
def short_cartpole_run(tmp_path_factory):
    """(train_dir, summary, log messages) of one finished CartPole run (3000 env steps, FAST_OVERRIDES,
    run folder <train_dir>/test; the messages the `sf_hydra` loggers emitted at INFO and above while it
    trained), trained once per test session and shared by the tests that only read a run (its summary,
    scalars, log, checkpoint) or play it. Such a test must not change what others read."""
    import logging

    from sf_hydra.app.train import train

    class Collect(logging.Handler):
        def __init__(self):
            super().__init__(logging.INFO)
            self.messages = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    train_dir, handler = tmp_path_factory.mktemp("short_cartpole_run"), Collect()
    logger = logging.getLogger("sf_hydra")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        summary = train(make_cfg(train_dir, "train_for_env_steps=3000"))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        GlobalHydra.instance().clear()
    return train_dir, summary, handler.messages


@pytest.fixture(autouse=True)
def _clear_global_hydra():
    """No test leaks an initialized Hydra into the next (e.g. one that called initialize itself)."""
    GlobalHydra.instance().clear()
    yield
    GlobalHydra.instance().clear()


MAX_TEST_PROCESSES = 4


def pytest_xdist_auto_num_workers(config):
    """What `-n auto` (pytest-xdist) means here: a test process per core this process may run on, at most
    MAX_TEST_PROCESSES. Many tests start a run of their own (a learner and two rollout workers): beyond a
    process per core they only contend. On the 2-core CI machine: 2 (the suite took 28 min against 41 min
    in one process, 2026-11-28: a test's run leaves a core idle while its learner imports Lightning)."""
    return max(1, min(MAX_TEST_PROCESSES, len(os.sched_getaffinity(0))))


# Test modules whose tests depend on the ones before them (README's lines: a later one plays the run an earlier
# one trained): under pytest-xdist each runs whole, in order, in one process.
ORDERED_MODULES = ("tests/packaging/test_readme_commands.py",)
# The tests whose processes run in the two namespace hosts of `cluster/slurm/start.sh --two-nodes`: one unit of work,
# so never two at once (the node-loss test kills every process in sfn2's namespace, and two runs by torchrun's
# convention there could pick the same MASTER_PORT).
TWO_HOST_MODULES = ("tests/ddp/test_torchrun_nodes.py", "tests/slurm/test_slurm_two_nodes.py",
                    "tests/slurm/test_slurm_node_loss.py")


def pytest_xdist_make_scheduler(config, log):
    """`-n` with the default `--dist load`: every test its own unit of work, as `load` schedules them, except
    ORDERED_MODULES, each one unit, and TWO_HOST_MODULES, together one unit. (xdist's own `--dist loadgroup` with
    an `xdist_group` mark grouped nothing under pytest 9.2 and xdist 3.8, measured 2026-11-28: the tests of one
    group ran on both processes; pytest-xdist issue #1386: pytest 9.2 no longer takes the `@group` suffix xdist
    writes into the node ids.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class OrderedModulesScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module in TWO_HOST_MODULES:
                return "the two namespace hosts"
            return module if module in ORDERED_MODULES else nodeid

    return OrderedModulesScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """`long` tests run only when asked for by name (`-m long`, `-m "slow or long"`): a `-m` of one's own
    replaces pyproject's `-m 'not long'`, and `-m "not slow"` alone would turn them back on."""
    if "long" in (config.option.markexpr or ""):
        return
    kept = [item for item in items if item.get_closest_marker("long") is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("long") is not None])
        items[:] = kept
