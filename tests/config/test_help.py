"""`python train.py --help [prefix]`: groups with their options and every key with its value
and meaning, generated from the composed config and the schema's comments; and every
schema field has such a comment."""

import subprocess
import sys
import typing
from dataclasses import dataclass, fields, is_dataclass

import pytest
from omegaconf import DictConfig, OmegaConf

from sf_hydra.app.cli import CONFIG_DIR
from sf_hydra.app.help import help_request, print_help
from sf_hydra.config import schema
from sf_hydra.config.field_docs import field_docs
from sf_hydra.config.store import env_schemas
from tests.conftest import REPO_ROOT, compose_cfg


def schema_classes() -> list:
    """Every dataclass of config/schema.py and of each env family's schema.py, and the
    dataclasses their fields nest (e.g. the doom family's `actions`)."""
    todo = [v for v in vars(schema).values() if is_dataclass(v) and v.__module__ == schema.__name__]
    todo += list(env_schemas().values())
    seen = []
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.append(cls)
        todo += [hint for hint in typing.get_type_hints(cls).values() if is_dataclass(hint)]
    return seen


def test_schema_classes_include_the_env_families_and_nested_nodes():
    names = {cls.__name__ for cls in schema_classes()}
    assert {"TrainConfig", "AlgoConfig", "LoggerConfig", "EnjoyConfig", "DoomEnvConfig", "AtariEnvConfig",
            "DoomActionsConfig"} <= names


@pytest.mark.parametrize("cls", schema_classes(), ids=lambda c: c.__name__)
def test_every_schema_field_has_a_doc(cls):
    docs = field_docs(cls)
    assert set(docs) == {f.name for f in fields(cls)}
    undocumented = [name for name, doc in docs.items() if not doc]
    assert not undocumented, (f"{cls.__module__}.{cls.__name__}: give these fields a `# comment` (on their line "
                              f"or the lines right above): {undocumented}")


@dataclass
class _Sample:
    documented: int = 1  # a trailing comment
    # a comment above,
    # on two lines
    above: str = "x"
    bare: float = 0.5
    tool: int = 0  # noqa: E501


@dataclass
class _SampleChild(_Sample):
    bare: float = 1.5  # redeclared with a doc


def test_field_docs_reads_trailing_and_preceding_comments():
    assert field_docs(_Sample) == {"documented": "a trailing comment", "above": "a comment above, on two lines",
                                   "bare": "", "tool": ""}
    assert field_docs(_SampleChild)["bare"] == "redeclared with a doc"
    assert field_docs(_SampleChild)["documented"] == "a trailing comment"  # inherited with its doc


def test_help_request_parses_the_command_line():
    assert help_request(["algo=ppo"]) is None
    assert help_request(["--help"]) == ("", [])
    assert help_request(["-h", "algo.lr"]) == ("algo.lr", [])
    assert help_request(["env=doom/basic", "--help", "env"]) == ("env", ["env=doom/basic"])
    assert help_request(["--help=model", "algo=ppo"]) == ("model", ["algo=ppo"])
    assert help_request(["--help", "algo.gamma=0.9"]) == ("", ["algo.gamma=0.9"])


def leaf_keys(node: DictConfig, path: str = "") -> list:
    """Every key of the composed config down to values (dict-valued keys such as
    `algo.optimizer` are one value)."""
    keys = []
    for key in node.keys():
        child = node._get_node(key)
        if isinstance(child, DictConfig) and is_dataclass(OmegaConf.get_type(child)):
            keys += leaf_keys(child, f"{path}{key}.")
        else:
            keys.append(f"{path}{key}")
    return keys


@pytest.fixture(scope="module")
def full_help() -> str:
    result = subprocess.run([sys.executable, str(REPO_ROOT / "train.py"), "--help"], capture_output=True, text=True,
                            timeout=120, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_help_lists_every_key_with_its_value_and_doc(full_help):
    cfg = compose_cfg()
    lines = full_help.splitlines()
    assert "powered by Hydra" not in full_help
    for key in leaf_keys(cfg):
        assert any(line.startswith(f"  {key}=") for line in lines), f"{key} missing from --help"
    # A key's line: its composed value (algo=appo's, not the schema's) and its meaning.
    gamma = next(line for line in lines if line.startswith("  algo.gae_lambda="))
    assert gamma.split()[0] == f"algo.gae_lambda={cfg.algo.gae_lambda}"
    assert field_docs(schema.AlgoConfig)["gae_lambda"] in gamma
    rnn = next(line for line in lines if line.startswith("  model.rnn_type="))
    assert rnn.split()[0] == "model.rnn_type=gru" and "(gru | lstm)" in rnn  # an Enum's choices
    assert cfg.algo.learning_rate != schema.AlgoConfig.learning_rate  # so the next line tells them apart
    assert f"  algo.learning_rate={cfg.algo.learning_rate} " in full_help
    # Top-level keys have a heading of their own, not the last group's.
    assert "\ntop level:\n  experiment=${env.name} " in full_help


def test_help_lists_the_groups_a_user_picks_and_no_internal_ones(full_help):
    section = full_help.split("Groups (")[1].split("\n\n")[0].splitlines()[1:]
    groups = {line.split()[0]: line for line in section if not line.startswith(" " * 4)}
    assert set(groups) == {"algo", "env", "model", "hardware", "logger", "trainer", "callbacks", "hydra/launcher",
                           "hydra/sweeper"}
    assert "*appo" in groups["algo"] and " ppo" in groups["algo"]
    assert "*default" in groups["logger"] and "wandb" in groups["logger"]
    assert "doom/basic" in full_help.split("Keys (")[0] and "*gym/cartpole" in full_help


def test_a_prefix_narrows_the_help(capsys):
    assert print_help(["--help", "algo.lr"], CONFIG_DIR) == 0
    out = capsys.readouterr().out
    keys = [line.split("=")[0].strip() for line in out.splitlines() if line.startswith("  algo")]
    assert keys == ["algo.lr_schedule", "algo.lr_schedule_kl_threshold", "algo.lr_adaptive_min",
                    "algo.lr_adaptive_max"]
    assert "Groups (" not in out and "algo.gamma" not in out

    assert print_help(["--help", "algo"], CONFIG_DIR) == 0
    out = capsys.readouterr().out
    assert "algo.gamma=0.99" in out and "model." not in out and "logger" not in out
    assert out.split("Groups (")[1].splitlines()[1].split() == ["algo", "*appo", "ppo"]


def test_help_shows_the_values_of_the_commands_overrides(capsys):
    assert print_help(["env=doom/basic", "algo.gamma=0.5", "--help", "env.reso"], CONFIG_DIR) == 0
    out = capsys.readouterr().out
    assert "env.resolution=" in out and field_docs(env_schemas()["doom"])["resolution"] in out
    assert print_help(["algo.gamma=0.5", "--help", "algo.gamma"], CONFIG_DIR) == 0
    assert "algo.gamma=0.5 " in capsys.readouterr().out


def test_help_with_an_unknown_prefix_or_override_says_so(capsys):
    assert print_help(["--help", "algo.nope"], CONFIG_DIR) == 2
    assert "no config group or key starts with 'algo.nope'" in capsys.readouterr().out
    assert print_help(["algo.nope=1", "--help"], CONFIG_DIR) == 2
    assert "nope" in capsys.readouterr().err
