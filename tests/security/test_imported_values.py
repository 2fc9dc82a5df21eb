"""A Sample Factory config.json from elsewhere is data: a value that would become an interpolation here (reading
this machine's environment into the imported run's config, and from there into a push) is refused by name."""

from __future__ import annotations

import json

import pytest

from sf_hydra.app.sample_factory.translate import import_config
from sf_hydra.config import ConfigError
from tests.conftest import CONF_DIR, REPO_ROOT

SF_CONFIG = REPO_ROOT / "tests" / "data" / "sf_cartpole_config.json"


@pytest.mark.parametrize("flag,value", [("wandb_project", "${oc.env:SF_TEST_SECRET}"),
                                        ("wandb_job_type", "x-${oc.env:HOME}"),
                                        ("wandb_tags", ["a", "${oc.env:SF_TEST_SECRET}"])])
def test_an_interpolation_in_an_imported_value_is_refused(monkeypatch, flag, value):
    monkeypatch.setenv("SF_TEST_SECRET", "hunter2")
    sf_cfg = json.loads(SF_CONFIG.read_text())
    sf_cfg[flag] = value
    with pytest.raises(ConfigError) as refused:
        import_config(sf_cfg, str(CONF_DIR))
    assert refused.value.key == f"config.json: {flag}" and "hunter2" not in str(refused.value)


def test_the_same_config_without_it_imports():
    assert import_config(json.loads(SF_CONFIG.read_text()), str(CONF_DIR)).groups
