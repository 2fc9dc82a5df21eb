"""hardware.layout=auto's choice from given measurements (app/layout.py, pure functions), and the values of
hardware.layout and its keys that are refused before any process starts."""

from __future__ import annotations

import math

import pytest

from sf_hydra.app.checks import check_command_line
from sf_hydra.app.layout import (
    TIE,
    Candidate,
    Costs,
    Measured,
    act_cost,
    candidates,
    fixed_values,
    pick,
    predicted,
    ranked,
    typed_layout_keys,
)
from sf_hydra.config import ConfigError, validate
from tests.conftest import CONF_DIR, compose_cfg

A = Candidate(2, 32, 1, "in_worker")
B = Candidate(2, 64, 2, "server")
C = Candidate(1, 16, 1, "in_worker")


def test_pick_is_the_best_measured_training_rate():
    measured = {A: Measured(10_000, 50e-6), B: Measured(20_000, 40e-6), C: Measured(5_000, 30e-6)}
    choice, why = pick(measured)
    assert choice == B
    assert "20,000 steps/s" in why and "3 layouts run" in why and str(A) in why  # the next best is named


def test_rates_within_the_tie_go_to_the_layout_with_the_least_sampler_cpu():
    """The learner bounds both: equal rates (within TIE), and the cheaper sampler leaves the learner more CPU."""
    near = 20_000 * (1 - TIE / 2)
    choice, _ = pick({A: Measured(near, 30e-6), B: Measured(20_000, 40e-6)})
    assert choice == A
    far = 20_000 * (1 - 2 * TIE)
    choice, _ = pick({A: Measured(far, 30e-6), B: Measured(20_000, 40e-6)})
    assert choice == B


def test_pick_of_nothing_measured_is_an_error():
    with pytest.raises(ValueError):
        pick({})


def test_candidates_span_the_machine_and_keep_the_typed_keys():
    cands = candidates(4, env_counts=(8, 16))
    assert {c.workers for c in cands} == {1, 2, 4, 8}  # 1, cores/2, cores, 2 x cores
    assert {c.splits for c in cands} == {1, 2} and {c.inference for c in cands} == {"in_worker", "server"}
    assert len(cands) == 4 * 2 * 2 * 2
    fixed = candidates(4, {"num_workers": 3, "inference": "server"}, env_counts=(8, 16))
    assert {c.workers for c in fixed} == {3} and {c.inference for c in fixed} == {"server"}
    assert all(c.envs % c.splits == 0 for c in candidates(2, {"num_envs_per_worker": 5}))  # 5 envs: 1 split only
    assert {c.splits for c in candidates(2, {"num_envs_per_worker": 5})} == {1}
    assert all(c.workers * c.envs <= 64 for c in candidates(16, env_counts=(8, 64), max_envs=64))


def test_act_cost_interpolates_between_measured_batches():
    act = {1: 1.0, 4: 4.0, 16: 10.0}
    assert act_cost(act, 4) == 4.0 and act_cost(act, 10) == pytest.approx(7.0)
    assert act_cost(act, 32) == pytest.approx(18.0)  # beyond: the last two sizes' slope
    assert act_cost({8: 2.0}, 16) == pytest.approx(4.0)


def test_the_model_never_predicts_more_than_the_learner_consumes():
    costs = Costs(cores=2, env_step_s=1e-6, act_s={1: 1e-4, 64: 2e-4, 256: 5e-4}, learner_s=1e-4)
    for c in candidates(2):
        assert predicted(c, costs) <= 1 / costs.learner_s + 1e-6
    # a costly env: the model prefers more workers (up to the cores) and batches acting over more envs
    slow_env = Costs(cores=2, env_step_s=1e-3, act_s={1: 1e-4, 64: 2e-4, 256: 5e-4}, learner_s=1e-6)
    assert predicted(Candidate(2, 16, 1, "in_worker"), slow_env) > predicted(Candidate(1, 16, 1, "in_worker"), slow_env)
    cheap_env = Costs(cores=2, env_step_s=1e-6, act_s={1: 1e-4, 64: 2e-4, 256: 5e-4}, learner_s=1e-7)
    many, few = Candidate(2, 64, 1, "in_worker"), Candidate(2, 8, 1, "in_worker")
    assert predicted(many, cheap_env) > predicted(few, cheap_env)
    order = ranked(candidates(2), cheap_env)
    assert predicted(order[0], cheap_env) == max(predicted(c, cheap_env) for c in order)
    assert math.isfinite(predicted(order[-1], cheap_env))


def test_typed_keys_are_read_from_the_overrides():
    typed = typed_layout_keys(["env=gym/cartpole", "hardware.num_workers=3", "+hardware.inference=server",
                               "hardware.layout=auto", "hardware.num_workers_x=1"])
    assert typed == ("num_workers", "inference")
    cfg = compose_cfg("hardware.num_workers=3", "hardware.inference=server", "hardware.worker_num_splits=2")
    assert fixed_values(cfg, typed) == {"num_workers": 3, "inference": "server"}


@pytest.mark.parametrize("override, key", [
    ("hardware.layout=fast", "hardware.layout"),
    ("hardware.layout_probe_sec=120", "hardware.layout_probe_sec"),
    ("hardware.layout_probe_sec=5", "hardware.layout_probe_sec"),
])
def test_bad_layout_values_are_refused_by_name(tmp_path, override, key):
    with pytest.raises(ConfigError) as info:
        check_command_line([override, f"train_dir={tmp_path}"], str(CONF_DIR))
    assert info.value.key == key, str(info.value)


@pytest.mark.parametrize("overrides", [("hardware.serial_mode=true",), ("hardware.devices=2",)])
def test_layout_auto_is_refused_where_it_has_nothing_to_pick(overrides):
    cfg = compose_cfg("hardware.layout=auto", *overrides)
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert info.value.key == "hardware.layout" and "manual" in info.value.allowed


def test_server_keys_with_layout_auto_wait_for_the_pick():
    """inference_device=cuda or more inference workers ask for a server: not refused as in_worker's keys."""
    validate(compose_cfg("hardware.layout=auto", "hardware.inference_workers=2"))
    with pytest.raises(ConfigError):
        validate(compose_cfg("hardware.inference_workers=2"))


def test_layouts_the_model_cannot_tell_apart_go_a_worker_per_core_first_then_fewer_envs():
    """A learner far slower than any sampler: every prediction is the learner's rate, so the order is the cost's."""
    learner_bound = Costs(cores=2, env_step_s=1e-5, act_s={1: 1e-4, 64: 2e-4, 256: 5e-4}, learner_s=1e-2)
    order = ranked(candidates(2), learner_bound)
    assert all(predicted(c, learner_bound) == pytest.approx(100.0) for c in order)
    assert (order[0].workers, order[0].envs) == (2, 8)
    assert order[-1].workers in (1, 4) and order[-1].envs == 64
