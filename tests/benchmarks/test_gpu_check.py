"""benchmarks/gpu_check.sh, checked where no GPU is: every variant it can run composes with the Doom battle
preset at a machine's worker count (a renamed or retyped key is caught here, before a GPU session spends
minutes on it) and passes the config rules once CUDA is swapped for the CPU (only a rule about CUDA itself
may refuse it then), each on/off variant differs from the baseline variant by its feature alone, and the
preset's worker count is replaced on both sides. (Its refusal without CUDA: tests/benchmarks/test_scaling.py.)"""

import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from sf_hydra.app.bad_input import compose_command_line
from sf_hydra.config import ConfigError, validate
from sf_hydra.config.location import find_configs
from tests.conftest import REPO_ROOT

BENCH = REPO_ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))
from vs_sample_factory import PRESETS, markdown_table, with_workers  # noqa: E402

PRESET = "doom_battle_gpu_16x8"  # the one gpu_check.sh runs
DEFAULT_VARIANTS = ("server", "server_bf16", "server_graphs")  # its VARIANTS: the baseline, then a feature on


def listed_variants() -> dict:
    """{label: [overrides]} as `gpu_check.sh --list-variants` prints them (it runs nothing, GPU or not)."""
    out = subprocess.run(["bash", str(BENCH / "gpu_check.sh"), "--list-variants"], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [line.split("\t") for line in out.stdout.splitlines() if line.strip()]
    return {label: overrides.split() for label, overrides in rows}


def compose(overrides):
    return compose_command_line(list(overrides), find_configs()[1])


def test_every_variant_composes_with_the_preset_at_a_machines_cores():
    variants = listed_variants()
    assert set(DEFAULT_VARIANTS) <= set(variants)
    preset = with_workers(PRESETS[PRESET], 13)
    for label, overrides in variants.items():
        cfg = compose([*preset.our_overrides, *overrides])
        assert cfg.hardware.num_workers == 13, label
        for override in overrides:  # every value took (none dropped or renamed on the way)
            key, value = override.split("=", 1)
            assert str(OmegaConf.select(cfg, key)).lower() == value.lower(), (label, override)


def test_every_variant_passes_the_config_rules_but_those_of_cuda_itself():
    for label, overrides in listed_variants().items():
        on_cpu = [o.replace("=cuda", "=cpu") for o in [*with_workers(PRESETS[PRESET], 13).our_overrides, *overrides]]
        cfg = compose(on_cpu)
        if label == "server_graphs":  # CUDA graphs are refused on a CPU server, by name: that rule only
            with pytest.raises(ConfigError, match="inference_cuda_graphs.*inference_device=cuda"):
                validate(cfg)
        else:
            validate(cfg)


def test_each_on_off_variant_differs_from_the_baseline_by_its_feature_alone():
    variants = listed_variants()
    base = variants["server"]
    assert variants["server_bf16"] == [*base, "hardware.precision=bf16-mixed"]
    assert variants["server_graphs"] == [*base, "hardware.inference_cuda_graphs=true"]
    baseline = compose([*PRESETS[PRESET].our_overrides, *base])
    assert str(baseline.hardware.precision) == "32-true" and baseline.hardware.inference_cuda_graphs is False


def test_a_renamed_key_is_refused_by_the_same_compose():
    with pytest.raises(ConfigError):
        compose([*PRESETS[PRESET].our_overrides, "hardware.inference_cuda_graph=true"])


def test_workers_replace_the_presets_on_both_sides_and_the_table_is_markdown():
    preset = with_workers(PRESETS[PRESET], 7)
    assert "--num_workers=7" in preset.sf_args and "--num_workers=16" not in preset.sf_args
    assert "hardware.num_workers=7" in preset.our_overrides and "hardware.num_workers=16" not in preset.our_overrides
    assert PRESETS[PRESET].sf_args.count("--num_workers=16") == 1  # the table's preset is left as it was
    table = markdown_table(["median", "SF", "ours"], [["FPS (steady)", "40,000", "60,000"]])
    assert table.splitlines() == ["| median | SF | ours |", "|---|---:|---:|", "| FPS (steady) | 40,000 | 60,000 |"]
