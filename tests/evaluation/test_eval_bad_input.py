"""Evaluation keys that make no sense are refused before any process starts (checks' config and family
stages), each naming the key, the value and what is allowed."""

import pytest

from sf_hydra.app.checks import check_config, checked_plan
from sf_hydra.config import ConfigError
from tests.conftest import compose_cfg

ON = "eval.every_env_steps=20000"


@pytest.mark.parametrize("overrides, key, allowed", [
    ((ON, "eval.episodes=0"), "eval.episodes", "an integer >= 1"),
    ((ON, "eval.every_sec=-1"), "eval.every_sec", ">= 0"),
    (("eval.every_env_steps=-5",), "eval.every_env_steps", ">= 0"),
    ((ON, "eval.max_episode_steps=0"), "eval.max_episode_steps", ">= 1"),
    ((ON, "eval.video_frames=0"), "eval.video_frames", ">= 1"),
    (("eval.video_every=2",), "eval.video_every", "eval.every_env_steps or eval.every_sec > 0"),
    ((ON, "eval.stop_on_eval_return=true", "train_until_avg_return=null"), "eval.stop_on_eval_return",
     "train_until_avg_return is null"),
    # a metric nothing reports: eval/ metrics without evaluation, an eval/ metric that does not exist
    (("save_best_metric=eval/return",), "save_best_metric", "eval.every_env_steps or eval.every_sec > 0"),
    ((ON, "save_best_metric=eval/win_rate"), "save_best_metric", "eval/return, eval/length"),
    # env overrides: a key the family's env node does not have, the family itself, a value of the wrong type
    ((ON, "+eval.env_overrides.no_such_key=3"), "eval.env_overrides.no_such_key", "frameskip"),
    ((ON, "+eval.env_overrides.family=doom"), "eval.env_overrides.family", "family or identity"),
    ((ON, "+eval.env_overrides.frameskip=fast"), "eval.env_overrides.frameskip", "a value env.frameskip takes"),
    (("+eval.env_overrides.frameskip=2",), "eval.env_overrides", "evaluation is off"),
])
def test_eval_keys_that_make_no_sense_are_refused(overrides, key, allowed):
    with pytest.raises(ConfigError) as e:
        check_config(compose_cfg(*overrides))
    assert e.value.key == key
    assert allowed in e.value.allowed


def test_an_env_override_the_family_refuses_is_named():
    """The Doom family refuses an unknown scenario for the evaluation env as it would for training."""
    cfg = compose_cfg("env=doom/basic", ON, "+eval.env_overrides.id=no_such_map")
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    assert e.value.key == "eval.env_overrides.id" and e.value.value == "no_such_map"


def test_sensible_eval_keys_pass():
    check_config(compose_cfg(ON, "eval.episodes=3", "save_best_metric=eval/return", "+eval.env_overrides.frameskip=2",
                             "train_until_avg_return=400", "eval.stop_on_eval_return=true"))
    check_config(compose_cfg("env=doom/basic", "eval.every_sec=60", "+eval.env_overrides.id=defend_the_center"))


@pytest.mark.parametrize("override, says", [
    ("+eval.env_overrides.kwargs.no_such_argument=1", "building the evaluation env failed: TypeError"),
    ("+eval.env_overrides.id=Acrobot-v1", "keep the training env's spaces"),  # 6 observations, 3 actions
])
def test_an_eval_env_the_family_cannot_build_or_the_policies_cannot_play_is_refused(override, says):
    """The env stage builds one evaluation env (as it builds one training env) before any process starts."""
    cfg = compose_cfg(ON, override)
    check_config(cfg)  # the keys are the env node's: the config's own rules pass
    with pytest.raises(ConfigError) as e:
        checked_plan(cfg)
    assert e.value.key == "eval.env_overrides" and says in e.value.allowed
