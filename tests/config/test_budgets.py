"""Step and frame budgets as people write them (`1M`, `2.5M`, `1B`, `10k`, `1e6`): taken on the command line and
saved as the integer; anything else refused, naming the forms accepted."""

from __future__ import annotations

import pytest

from sf_hydra.app.checks import check_command_line
from sf_hydra.config import ConfigError
from sf_hydra.config.aliases import BUDGET_KEYS, apply_aliases, budget
from tests.conftest import CONF_DIR


@pytest.mark.parametrize("text,value", [("1M", 10**6), ("2.5M", 2_500_000), ("1B", 10**9), ("10k", 10_000),
                                        ("1e6", 10**6), ("2.5e3", 2500), ("1000000", 10**6), ("3m", 3 * 10**6),
                                        ("1.5k", 1500), ("0", 0)])
def test_a_budget_reads_as_the_integer_it_means(text, value):
    assert budget(text) == value


@pytest.mark.parametrize("text", ["1.5", "2.5e-1", "1M5", "-3", "abc", "1.0001k", "k", "", "1e"])
def test_anything_else_is_no_budget(text):
    assert budget(text) is None


def test_every_budget_key_sweeps_too():
    assert apply_aliases([f"{k}=1M" for k in BUDGET_KEYS]) == [f"{k}=1000000" for k in BUDGET_KEYS]
    assert apply_aliases(["train_for_env_steps=1M,2.5M,10k"]) == ["train_for_env_steps=1000000,2500000,10000"]
    assert apply_aliases(["algo.rollout=1k", "+experiment=x"]) == ["algo.rollout=1k", "+experiments=x"]


def test_the_composed_config_holds_the_integer(tmp_path):
    checked = check_command_line(apply_aliases([f"train_dir={tmp_path}", "train_for_env_steps=2.5M",
                                                "eval.every_env_steps=10k"]), str(CONF_DIR))
    assert checked.cfg.train_for_env_steps == 2_500_000 and checked.cfg.eval.every_env_steps == 10_000


def test_a_fraction_of_a_step_names_the_forms(tmp_path):
    with pytest.raises(ConfigError) as refused:
        check_command_line(apply_aliases([f"train_dir={tmp_path}", "train_for_env_steps=1.5M5"]), str(CONF_DIR))
    assert refused.value.key == "train_for_env_steps" and "1M, 2.5M, 1B, 10k, 1e6" in refused.value.allowed
