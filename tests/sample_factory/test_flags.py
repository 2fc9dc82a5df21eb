"""The Sample Factory flag table (sf_hydra/app/sample_factory/flags.py): complete against the v2
reference (tests/data, a copy of its --help), every key it maps exists, converters round-trip,
and docs/parameters.md is the generator's output."""

import importlib.util
import re

import pytest
from omegaconf import OmegaConf

from sf_hydra.app.sample_factory import env_names
from sf_hydra.app.sample_factory.flags import (
    BY_NAME,
    ENJOY_KEYS,
    ENV_FLAGS,
    FLAGS,
    GROUPS,
    MAPPED,
    from_ours,
    literal,
    ours,
    parse,
    with_env_converter,
)
from sf_hydra.config.schema import EnjoyConfig
from sf_hydra.core.errors import ConfigError
from tests.conftest import CONF_DIR, REPO_ROOT, compose_cfg

REFERENCE = REPO_ROOT / "tests" / "data" / "sample-factory-v2-parameter-reference.txt"
PATH_DEFAULTS = {"train_dir", "wandb_dir"}  # the machine's folders where the reference was made
CONF = str(CONF_DIR)


def reference_flags() -> dict:
    """{flag: default as printed} from the `optional arguments:` part of the reference."""
    body = REFERENCE.read_text().split("optional arguments:", 1)[1]
    entries, current = {}, None
    for line in body.splitlines():
        head = re.match(r"^(?:-\w, --(\w+)|--(\w+)(?=$| [A-Z\[{]))", line)
        if head:
            current = head.group(1) or head.group(2)
            entries[current] = line
        elif current:
            entries[current] += ("" if entries[current].endswith("-") else " ") + line
    return {name: re.search(r"\(default:\s*(.*)\)\s*$", text).group(1) for name, text in entries.items()}


def test_every_reference_flag_has_one_row():
    flags = reference_flags()
    assert len(flags) == 118
    names = {row.name for row in FLAGS}
    assert sorted(set(flags) - names) == [], "flags of the reference without a row"
    assert sorted(names - set(flags)) == [], "rows for flags the reference does not have"
    for name, printed in flags.items():
        if name not in PATH_DEFAULTS:
            assert literal(printed) == BY_NAME[name].sf_default, name


def test_mapped_keys_exist_in_the_composed_config():
    default = compose_cfg()
    by_family = {"": default, "atari": compose_cfg("env=atari/pong"), "doom": compose_cfg("env=doom/basic")}
    enjoy = OmegaConf.structured(EnjoyConfig)
    missing = []
    for row in FLAGS + ENV_FLAGS:
        if row.kind != MAPPED:
            continue
        cfg = enjoy if row.stage == "enjoy" else by_family[row.family]
        if row.key in GROUPS:
            assert row.key in default
            continue
        if OmegaConf.select(cfg, row.key, default="<absent>", throw_on_missing=False) == "<absent>":
            missing.append(row.key)
    assert missing == []


@pytest.mark.parametrize("row", [r for r in FLAGS if r.kind == MAPPED and r.name != "env"], ids=lambda r: r.name)
def test_converters_round_trip(row):
    value = parse(row, row.sf_default)
    family = row.family
    assert from_ours(row, ours(row, value, family)) == value
    if row.name == "device":
        assert ours(row, "gpu") == {"hardware.device": "cuda"}
        assert from_ours(row, {"hardware.device": "cuda"}) == "gpu"


def test_doom_timelimit_round_trips_in_tics():
    row = BY_NAME["timelimit"]
    assert ours(row, 1.5, "doom") == {"env.episode_timeout": 3150}  # 1.5 min x 60 s x 35 tics
    assert from_ours(row, ours(row, 1.5, "doom")) == 1.5
    assert ours(row, None, "doom") == {}


def test_training_flags_enjoy_reads_are_keys_of_enjoy():
    fields = EnjoyConfig.__dataclass_fields__
    assert all(key in fields and BY_NAME[name].stage == "train" for name, key in ENJOY_KEYS.items())


ATARI_GAMES = importlib.util.find_spec("ale_py") is not None  # the atari extra: every ALE game has a name
NEEDS_ATARI = pytest.mark.skipif(not ATARI_GAMES, reason="the atari extra (ale_py): the names of its game list")


def test_env_names_round_trip():
    row = with_env_converter(BY_NAME["env"], CONF)
    names = env_names.sf_env_names(CONF)
    assert {"doom_basic": "doom/basic", "doom_battle": "doom/battle", "atari_pong": "atari/pong",
            "mujoco_halfcheetah": "mujoco/halfcheetah", "mujoco_walker": "mujoco/walker2d",
            "dmlab_30": "dmlab/dmlab_30", "CartPole-v1": "gym/cartpole"}.items() <= names.items()
    if ATARI_GAMES:  # a game without a config file of ours: from ale_py's list
        assert names["atari_spaceinvaders"] == "atari/space_invaders"
    for name in names:
        assert from_ours(row, ours(row, name)) == name
    assert ours(row, "MountainCar-v0") == {"env": "gym/any", "env.id": "MountainCar-v0"}
    assert from_ours(row, ours(row, "MountainCar-v0")) == "MountainCar-v0"


@pytest.mark.parametrize("name, close", [("doom_basik", "doom_basic"), ("doom_two_colors_easy", None),
                                         pytest.param("atari_spaceinvader", "atari_spaceinvaders", marks=NEEDS_ATARI),
                                         ("CartPol-v1", "CartPole-v1")])
def test_unmapped_env_names_are_refused_with_close_matches(name, close):
    with pytest.raises(ConfigError) as e:
        env_names.to_config(name, CONF)
    assert name in str(e.value)
    if close:
        assert repr(close) in str(e.value)


@pytest.mark.parametrize("name, raw, value", [
    ("use_rnn", "False", False), ("use_rnn", "true", True), ("seed", "None", None), ("seed", "3", 3),
    ("train_for_env_steps", "1e10", 10_000_000_000), ("encoder_mlp_layers", ["256", "128"], [256, 128]),
    ("encoder_mlp_layers", "[256, 128]", [256, 128]), ("wandb_tags", "a,b", ["a", "b"]),
    ("decoder_mlp_layers", [], []), ("learning_rate", "3e-4", 3e-4),
])
def test_values_are_read_as_sample_factory_reads_them(name, raw, value):
    assert parse(BY_NAME[name], raw) == value


@pytest.mark.parametrize("name, raw", [("use_rnn", "maybe"), ("num_workers", "x"), ("seed", "1.5")])
def test_bad_values_name_the_flag(name, raw):
    with pytest.raises(ConfigError, match=f"--{name}="):
        parse(BY_NAME[name], raw)


def test_docs_are_the_generators_output():
    pytest.importorskip("ale_py", reason="the atari extra: docs/parameters.md lists the names of ale_py's games")
    from sf_hydra.app.sample_factory.parameter_reference import render

    committed = (REPO_ROOT / "docs" / "parameters.md").read_text()
    assert committed == render(), \
        "regenerate: python -m sf_hydra.app.sample_factory.parameter_reference > docs/parameters.md"
    assert all(f"| `--{row.name}` |" in committed for row in FLAGS + ENV_FLAGS)
