"""Every rule of sf_hydra.config.validation, and what Hydra itself rejects while composing.

Range rules are checked on copies of one composed config (Hydra composition costs ~0.2 s);
the rules about composition, env ids and mandatory values compose with real overrides.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import math
import os
import typing

import pytest
import torch
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import OmegaConf

from sf_hydra.app.train import check_config
from sf_hydra.config import ConfigError, validate, validation
from sf_hydra.config.choices import Choice
from sf_hydra.config.schema import TrainConfig
from sf_hydra.config.validation import AT_LEAST_ONE, HALF_OPEN_UNIT_INTERVAL, NON_NEGATIVE, POSITIVE, UNIT_INTERVAL
from tests.conftest import CONF_DIR, REPO_ROOT, compose_cfg

needs_vizdoom = pytest.mark.skipif(importlib.util.find_spec("vizdoom") is None,
                                   reason="the doom env family needs vizdoom")


@pytest.fixture(scope="module")
def base():
    """The default config (CartPole, MLP, APPO). Never modified: use `edited`."""
    return compose_cfg()


def edited(cfg, values: dict):
    """A copy of `cfg` with dotted keys set (typed like a Hydra override: 0 on a float is 0.0)."""
    cfg = copy.deepcopy(cfg)
    for key, value in values.items():
        OmegaConf.update(cfg, key, value, merge=False)
    return cfg


def rejected(cfg, key: str) -> ConfigError:
    """check_config(cfg) (validate, then the env family's and sampler's checks) must raise a
    ConfigError naming `key`, whose message starts with key=<value>."""
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    err = info.value
    assert err.key == key, f"expected a complaint about {key}, got: {err}"
    assert str(err).startswith(f"{key}={err.value!r} is not allowed: "), str(err)
    return err


def same(a, b) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b


# -- configs that must work ------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides,expected",
    [
        pytest.param((), {"env.id": "CartPole-v1", "env.factory._target_": "sf_hydra.envs.gym.family.GymFamily",
                          "model.use_rnn": False, "algo.async_rl": True}, id="default"),
        pytest.param(("algo=ppo",), {"algo.async_rl": False, "env.id": "CartPole-v1"}, id="ppo"),
        pytest.param(("env=doom/basic",),
                     {"env.factory._target_": "sf_hydra.envs.doom.family.DoomFamily", "env.id": "basic",
                      "model.encoder_conv_architecture": "convnet_simple", "model.use_rnn": True},
                     id="doom_basic", marks=needs_vizdoom),
    ],
)
def test_shipped_configs_validate(overrides, expected):
    cfg = compose_cfg(*overrides)
    check_config(cfg)
    assert {key: OmegaConf.select(cfg, key) for key in expected} == expected


@pytest.mark.parametrize(
    "overrides",
    [pytest.param((), id="default"), pytest.param(("algo=ppo",), id="ppo"),
     pytest.param(("env=doom/basic",), id="doom_basic", marks=needs_vizdoom)],
)
def test_fast_test_settings_validate(tmp_cfg, tmp_path, overrides):
    cfg = tmp_cfg(*overrides)
    validate(cfg)
    assert cfg.train_dir == str(tmp_path) and cfg.experiment == "test"
    assert (cfg.hardware.num_envs_per_worker, cfg.algo.rollout, cfg.algo.batch_size) == (4, 16, 128)


def test_any_gym_id():
    cfg = compose_cfg("env=gym/any", "env.id=Acrobot-v1")
    validate(cfg)
    assert cfg.env.family == "gym" and cfg.env.name == "Acrobot-v1" and cfg.experiment == "Acrobot-v1"


def test_any_gym_id_without_id_names_env_id():
    err = rejected(compose_cfg("env=gym/any"), "env.id")
    assert err.value == "???" and "env.id=..." in str(err)


# -- what Hydra rejects while composing -------------------------------------------------------


def test_hydra_rejects_unknown_key():
    with pytest.raises(ConfigCompositionException, match="algo.foo"):
        compose_cfg("algo.foo=1")


@pytest.mark.parametrize("override", ["algo.rollout=abc", "algo.async_rl=maybe"])
def test_hydra_rejects_wrong_type(override):
    with pytest.raises(ConfigCompositionException) as info:
        compose_cfg(override)
    key, value = override.split("=")
    full = f"{info.value}\n{info.value.__cause__}"
    assert key in full and value in full


def test_hydra_rejects_unknown_env_config():
    with pytest.raises(MissingConfigException, match="env/gym/nope"):
        compose_cfg("env=gym/nope")


def test_unknown_env_config_lists_near_matches_first():
    from sf_hydra.app.env_choices import check_env_overrides

    with pytest.raises(ConfigError) as info:
        check_env_overrides(["seed=1", "env=gym/cartpole,doom/batle"], CONF_DIR)
    msg = str(info.value)
    assert info.value.key == "env" and info.value.value == "doom/batle"
    assert msg.index("'doom/battle'") < msg.index("families:"), msg
    assert len(msg) < 1000, msg  # not every config there is
    with pytest.raises(ConfigError) as info:
        check_env_overrides(["env=gym/nope"], CONF_DIR)
    assert "gym/cartpole" in str(info.value) and "doom" in str(info.value)  # the family's configs, the families
    check_env_overrides(["env=gym/cartpole,doom/basic"], CONF_DIR)  # known names pass


def test_train_py_rejects_unknown_env_before_starting(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(REPO_ROOT / "train.py"), "env=doom/nope", f"train_dir={tmp_path}"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "env='doom/nope' is not allowed" in proc.stderr and "doom/basic" in proc.stderr
    assert not any(tmp_path.iterdir())


def test_unknown_option_of_a_flat_group_lists_available_options():
    with pytest.raises(MissingConfigException) as info:
        compose_cfg("model=nope")
    assert "Available options in 'model'" in str(info.value)
    assert "mlp" in str(info.value) and "conv_gru" in str(info.value)


# -- single-key rules -------------------------------------------------------------------------


def choice_keys(node=TrainConfig, prefix: str = "") -> dict:
    """Dotted key -> its Choice enum, for every enum-typed key of the schema."""
    found = {}
    for name, hint in typing.get_type_hints(node).items():
        if isinstance(hint, type) and issubclass(hint, Choice):
            found[prefix + name] = hint
        elif dataclasses.is_dataclass(hint):
            found.update(choice_keys(hint, f"{prefix}{name}."))
    return found


CHOICE_KEYS = choice_keys()


def test_choice_keys_are_found():
    assert {"restart_behavior", "hardware.device", "hardware.precision",
            "model.rnn_type", "model.nonlinearity", "model.policy_initialization", "model.encoder_conv_architecture",
            "algo.lr_schedule"} <= set(CHOICE_KEYS)


@pytest.mark.parametrize("key", sorted(CHOICE_KEYS))
def test_choice_rejects_unknown_value_at_compose(key):
    with pytest.raises(ConfigCompositionException) as info:
        compose_cfg(f"{key}=bogus_choice")
    full = f"{info.value}\n{info.value.__cause__}"
    assert key in full and "bogus_choice" in full
    for member in CHOICE_KEYS[key]:
        assert member.name in full


@pytest.mark.parametrize(
    "key,option",
    [(k, m.name) for k, enum in sorted(CHOICE_KEYS.items()) for m in enum
     if not (k in ("hardware.device", "hardware.inference_device") and m.name == "cuda"
             and not torch.cuda.is_available())
     and m.name != "envpool"],  # needs batched_sampling and the envpool package: tests/sampler/test_batched_sampling.py
)
def test_choice_accepts_every_option(base, key, option):
    needs = {"hardware.inference_device": {"hardware.inference": "server"},  # meaningful only with it
             "selfplay.opponent_sampling": {"selfplay.pool_size": 2}}
    cfg = edited(base, {key: option, **needs.get(key, {})})
    validate(cfg)
    assert OmegaConf.select(cfg, key) == option and str(OmegaConf.select(cfg, key)) == option


def test_choices_survive_the_saved_yaml_and_the_workers_container(base):
    """config.yaml (to_yaml, reloaded by enjoy.py and on resume) and a spawned worker's copy
    (to_container, pickled, OmegaConf.create) keep each choice equal to its plain string."""
    import pickle

    cfg = edited(base, {"hardware.precision": "bf16-mixed", "model.rnn_type": "lstm"})
    saved = OmegaConf.to_yaml(cfg, resolve=True)
    reloaded = OmegaConf.merge(OmegaConf.structured(TrainConfig), OmegaConf.create(saved))
    worker = OmegaConf.create(pickle.loads(pickle.dumps(OmegaConf.to_container(cfg, resolve=True))))
    for copy_ in (reloaded, worker):
        assert copy_.hardware.precision == "bf16-mixed" and f"{copy_.model.rnn_type}" == "lstm"
        assert {"lstm": 1}[copy_.model.rnn_type] == 1


def test_enum_members_match_the_model_tables():
    from sf_hydra.config.choices import ConvArchitecture, Nonlinearity
    from sf_hydra.models.encoders import ACTIVATIONS, CONV_ARCHITECTURES, RESNET_ARCHITECTURES

    assert {m.name for m in Nonlinearity} == set(ACTIVATIONS)
    assert not set(CONV_ARCHITECTURES) & set(RESNET_ARCHITECTURES)
    assert {m.name for m in ConvArchitecture} == set(CONV_ARCHITECTURES) | set(RESNET_ARCHITECTURES)


def test_train_py_rejects_a_bad_choice_before_starting(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(REPO_ROOT / "train.py"), "model.rnn_type=gruu", f"train_dir={tmp_path}"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "model.rnn_type" in proc.stderr and "gruu" in proc.stderr and "gru, lstm" in proc.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("value", [0, -1])
@pytest.mark.parametrize("key", AT_LEAST_ONE)
def test_at_least_one(base, key, value):
    err = rejected(edited(base, {key: value}), key)
    assert err.value == value and ">= 1" in str(err)


@pytest.mark.parametrize("value", [0.0, -1.5, float("nan")])
@pytest.mark.parametrize("key", POSITIVE)
def test_positive(base, key, value):
    err = rejected(edited(base, {key: value}), key)
    assert same(err.value, value) and "> 0" in str(err)


@pytest.mark.parametrize("value", [-0.001, float("nan")])
@pytest.mark.parametrize("key", NON_NEGATIVE)
def test_non_negative(base, key, value):
    err = rejected(edited(base, {key: value}), key)
    assert same(err.value, value) and ">= 0" in str(err)


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan")])
@pytest.mark.parametrize("key", UNIT_INTERVAL)
def test_unit_interval(base, key, value):
    err = rejected(edited(base, {key: value}), key)
    assert same(err.value, value) and "[0, 1]" in str(err)


@pytest.mark.parametrize("value", [-0.1, 1.0, float("nan")])
@pytest.mark.parametrize("key", HALF_OPEN_UNIT_INTERVAL)
def test_half_open_unit_interval(base, key, value):
    err = rejected(edited(base, {key: value}), key)
    assert same(err.value, value) and "[0, 1)" in str(err)


def test_range_boundaries_are_allowed(base):
    """The bounds themselves pass the range rules (the sampling rules may still object)."""
    values = {key: 1 for key in AT_LEAST_ONE}
    values.update({key: 1e-9 for key in POSITIVE})
    values.update({key: 0.0 for key in NON_NEGATIVE})
    validation._check_ranges(edited(base, {**values, **{key: 0.0 for key in UNIT_INTERVAL + HALF_OPEN_UNIT_INTERVAL}}))
    validation._check_ranges(edited(base, {**values, **{key: 1.0 for key in UNIT_INTERVAL}}))


def test_nan_override_goes_through_hydra_and_is_rejected():
    rejected(compose_cfg("algo.max_grad_norm=nan"), "algo.max_grad_norm")


@pytest.mark.parametrize("value", [0, -2, -100])
def test_recurrence_rejects(base, value):
    err = rejected(edited(base, {"algo.recurrence": value}), "algo.recurrence")
    assert err.value == value and "-1" in str(err)


@pytest.mark.parametrize("value", [-1, 1, 4, 32])
def test_recurrence_accepts(base, value):
    validate(edited(base, {"algo.recurrence": value, "algo.rollout": 32}))


@pytest.mark.parametrize("name", ["", "a/b", "/abs", ".", ".."])
def test_experiment_name_rejects(base, name):
    err = rejected(edited(base, {"experiment": name}), "experiment")
    assert err.value == name


def test_experiment_name_accepts(base):
    validate(edited(base, {"experiment": "my-run_2.v3"}))


def test_experiment_name_from_command_line():
    assert rejected(compose_cfg("experiment=runs/a"), "experiment").value == "runs/a"


@pytest.mark.parametrize("value", [0, 19])
def test_worker_nice_accepts_nice_levels(base, value):
    validate(edited(base, {"hardware.worker_nice": value}))


@pytest.mark.parametrize("value", [-1, 20])
def test_worker_nice_rejects_outside_nice_levels(base, value):
    err = rejected(edited(base, {"hardware.worker_nice": value}), "hardware.worker_nice")
    assert "0" in str(err) and "19" in str(err)


@pytest.mark.parametrize("value", [-2, 12])
def test_learner_micro_batch_rejects(base, value):
    cfg = edited(base, {"model.use_rnn": True, "algo.rollout": 8, "algo.batch_size": 64})
    err = rejected(edited(cfg, {"hardware.learner_micro_batch": value}), "hardware.learner_micro_batch")
    assert "algo.recurrence=8" in str(err)


@pytest.mark.parametrize("value", [-1, 0, 8, 24])
def test_learner_micro_batch_accepts(base, value):
    validate(edited(base, {"model.use_rnn": True, "algo.rollout": 8, "algo.batch_size": 64,
                           "hardware.learner_micro_batch": value}))


# -- rules that relate several keys -----------------------------------------------------------


def test_envs_per_worker_must_divide_into_splits(base):
    err = rejected(edited(base, {"hardware.num_envs_per_worker": 5, "hardware.worker_num_splits": 2}),
                   "hardware.num_envs_per_worker")
    assert err.value == 5 and "worker_num_splits=2" in str(err)
    validate(edited(base, {"hardware.num_envs_per_worker": 6, "hardware.worker_num_splits": 3}))
    validate(edited(base, {"hardware.num_envs_per_worker": 5, "hardware.worker_num_splits": 1}))


def test_rollout_must_be_a_multiple_of_recurrence(base):
    cfg = edited(base, {"algo.recurrence": 8, "algo.rollout": 12, "algo.batch_size": 96,
                        "algo.num_batches_per_epoch": 1})
    err = rejected(cfg, "algo.rollout")
    assert err.value == 12 and "recurrence=8" in str(err)


def test_rnn_automatic_recurrence_is_the_rollout(base):
    validate(edited(base, {"model.use_rnn": True, "algo.recurrence": -1, "algo.rollout": 24,
                           "algo.batch_size": 48, "algo.num_batches_per_epoch": 1}))


def test_batch_size_must_be_a_multiple_of_recurrence(base):
    cfg = edited(base, {"algo.recurrence": 16, "algo.rollout": 32, "algo.batch_size": 520,
                        "algo.num_batches_per_epoch": 1})
    err = rejected(cfg, "algo.batch_size")
    assert err.value == 520 and "recurrence=16" in str(err)


def test_rnn_batch_size_must_hold_whole_rollouts(base):
    cfg = edited(base, {"model.use_rnn": True, "algo.recurrence": -1, "algo.rollout": 32, "algo.batch_size": 48})
    err = rejected(cfg, "algo.batch_size")
    assert err.value == 48 and "recurrence=32" in str(err)


def test_iteration_must_hold_whole_trajectories(base):
    cfg = edited(base, {"algo.rollout": 16, "algo.batch_size": 40, "algo.num_batches_per_epoch": 3})
    err = rejected(cfg, "algo.batch_size")
    assert err.value == 40 and "(= 120)" in str(err) and "rollout=16" in str(err)
    # The product is what matters: 24 alone is not a multiple of 16, 2 x 24 is.
    validate(edited(base, {"algo.rollout": 16, "algo.batch_size": 24, "algo.num_batches_per_epoch": 2}))


SYNC = {
    "hardware.num_workers": 2, "hardware.num_envs_per_worker": 4, "algo.rollout": 16, "algo.num_batches_per_epoch": 1,
}


def test_sync_round_must_be_a_multiple_of_the_iteration(base):
    err = rejected(edited(base, {**SYNC, "algo.async_rl": False, "algo.batch_size": 256}), "algo.batch_size")
    msg = str(err)
    assert err.value == 256
    assert "2 x 4 x 16 = 128" in msg and "256 x 1 = 256" in msg and "async_rl=false" in msg


def test_sync_round_rule_only_applies_to_sync_mode(base):
    validate(edited(base, {**SYNC, "algo.async_rl": True, "algo.batch_size": 256}))
    validate(edited(base, {**SYNC, "algo.async_rl": False, "algo.batch_size": 64}))  # two iterations per round
    validate(edited(base, {**SYNC, "algo.async_rl": False, "algo.batch_size": 128}))


def test_sync_round_rule_from_command_line():
    cfg = compose_cfg("algo=ppo", "hardware.num_workers=2", "hardware.num_envs_per_worker=6", "algo.rollout=32",
                      "algo.batch_size=256", "algo.num_batches_per_epoch=1")
    err = rejected(cfg, "algo.batch_size")
    assert "= 384 transitions" in str(err) and "= 256" in str(err)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is visible")
def test_cuda_without_cuda(base):
    err = rejected(edited(base, {"hardware.device": "cuda"}), "hardware.device")
    assert err.value == "cuda" and "CUDA" in str(err)


# -- env rules --------------------------------------------------------------------------------


def test_unknown_gym_id_lists_close_matches():
    err = rejected(compose_cfg("env=gym/any", "env.id=CartPol-v1"), "env.id")
    assert err.value == "CartPol-v1" and "close matches" in str(err) and "'CartPole-v1'" in str(err)


def test_unrelated_gym_id_gives_examples(base):
    err = rejected(edited(base, {"env.id": "Qjxkwvqjxkwv-v99"}), "env.id")
    assert "CartPole-v1" in str(err) and "doom" in str(err)


def test_unknown_env_family(base):
    err = rejected(edited(base, {"env.factory._target_": "sf_hydra.envs.nope.family.NopeFamily"}),
                   "env.factory._target_")
    assert err.value == "sf_hydra.envs.nope.family.NopeFamily" and "an importable dotted path" in str(err)


def test_env_family_whose_package_is_missing(base):
    err = rejected(edited(base, {"env.factory._target_": "sf_hydra_tests_no_such_module.Family"}),
                   "env.factory._target_")
    assert "No module named 'sf_hydra_tests_no_such_module'" in str(err)


def test_dmlab_is_refused_with_what_is_missing():
    err = rejected(compose_cfg("env=dmlab/dmlab_30"), "env.family")
    assert err.value == "dmlab" and "DeepMind Lab is built from source" in str(err) and "no adapter" in str(err)


@needs_vizdoom
def test_unknown_doom_scenario():
    err = rejected(compose_cfg("env=doom/basic", "env.id=basicc"), "env.id")
    assert err.value == "basicc" and "'basic'" in str(err) and "'health_gathering'" in str(err)


@needs_vizdoom
def test_doom_scenario_by_path():
    import vizdoom

    check_config(compose_cfg("env=doom/basic",
                             f"env.id={os.path.join(vizdoom.scenarios_path, 'defend_the_center.cfg')}"))


def test_time_to_target_needs_a_target(base):
    err = rejected(edited(base, {"sweep_objective": "time_to_target", "train_until_avg_return": None}),
                   "sweep_objective")
    assert err.value == "time_to_target" and "train_until_avg_return" in str(err)
    validate(edited(base, {"sweep_objective": "time_to_target", "train_until_avg_return": 450.0}))
    validate(edited(base, {"sweep_objective": "avg_return", "train_until_avg_return": None}))
