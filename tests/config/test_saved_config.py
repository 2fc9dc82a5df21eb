"""A saved config.yaml of an older sf_hydra, migrated once where it is read (sf_hydra.config.saved): each schema
key it lacks takes the schema's default (its env keys by the run's family's schema), or the value such a run
behaved as; what it holds stays as saved, keys the schema no longer has and plain mappings included."""

from omegaconf import OmegaConf

from sf_hydra.config.saved import with_schema_defaults
from tests.conftest import compose_cfg


def _saved(*overrides: str):
    return OmegaConf.create(OmegaConf.to_yaml(compose_cfg(*overrides), resolve=True))


def test_missing_schema_keys_take_their_defaults_and_saved_values_stay():
    saved = _saved("env=doom/basic", "algo.num_policies=2", "+env.kwargs.render_hud=true")
    for node, key in ((saved.algo, "policy_assignment"), (saved.algo, "gamma"), (saved.env, "resolution"),
                      (saved.env, "pixel_format"), (saved, "eval"), (saved.hardware, "inference_device")):
        del node[key]
    saved.algo.learning_rate = 0.003  # a value of its own
    saved.algo["a_key_removed_since"] = 1
    migrated = with_schema_defaults(saved)
    assert migrated.algo.gamma == 0.99 and migrated.hardware.inference_device == "cpu"
    assert migrated.env.resolution == "256x144" and migrated.env.pixel_format == "CHW"  # Doom's schema
    assert migrated.eval.every_env_steps == 0 and migrated.eval.episodes == 10
    assert migrated.algo.policy_assignment == "per_episode"  # what a run saved before the key did
    assert migrated.algo.learning_rate == 0.003 and migrated.algo.num_policies == 2
    assert migrated.algo.a_key_removed_since == 1 and dict(migrated.env.kwargs) == {"render_hud": True}
    assert "gamma" not in saved.algo  # the config read is left as it was


def test_a_current_config_is_unchanged_and_a_plain_mapping_gains_nothing():
    saved = _saved("algo.num_policies=2", "algo.policy_assignment=fixed")
    assert OmegaConf.to_container(with_schema_defaults(saved)) == OmegaConf.to_container(saved)
    del saved.model.encoder["_target_"]  # a part's own arguments: a plain mapping, not the schema's
    assert "_target_" not in with_schema_defaults(saved).model.encoder
