"""Every command line of Sample Factory 1.x's README (tests/data/sample-factory-v1-README.md, the paper's
experiments) given to train.py: translated (1.x's renamed flags through the 1.x rows of the table, docs/
parameters.md) and trained for a few seconds with the budgets and worker counts a user lowers on a small
machine, or refused with one message that names every flag it cannot take, each with its reason."""

from __future__ import annotations

import re
import shlex

import pytest

from sf_hydra.app.checks import check_command_line
from sf_hydra.app.sample_factory.translate import translate_argv
from sf_hydra.app.train import train
from sf_hydra.config import ConfigError
from tests.conftest import CONF_DIR, REPO_ROOT

V1_README = REPO_ROOT / "tests" / "data" / "sample-factory-v1-README.md"
CONF = str(CONF_DIR)
# What a user lowers on a 2-core machine: one worker of two envs, small batches, seconds of training.
LOWERED = {"num_workers": "1", "num_envs_per_worker": "2", "batch_size": "64", "train_for_env_steps": "256",
           "train_for_seconds": "3", "sample_env_frames": "256"}
# Refused, each flag named with its reason: DMLab is not available here; the runner is not train.py.
REFUSED = {
    "dmlab_30_resnet_4pbt_w90_v12": ["--encoder_custom=dmlab_instructions", "--dmlab_extended_action_set=True",
                                     "--dmlab_one_task_per_worker=True", "--dmlab_use_level_cache=True",
                                     "--dmlab_level_cache_path=/home/user/dmlab_cache"],
    "runner": ["--runner=processes", "--max_parallel=12", "--experiments_per_gpu=3", "--num_gpus=4"],
}


def command_lines():
    """(id, module, flags) of every `python -m sample_factory...` line of the 1.x README."""
    out, seen = [], set()
    for module, rest in re.findall(r"^python -m (sample_factory\S+) (.*)$", V1_README.read_text(), re.M):
        args = shlex.split(rest)
        name = next((a.split("=", 1)[1] for a in args if a.startswith("--experiment=")), module.split(".")[-1])
        line_id = f"{module.split('.')[-1]}:{name}"
        line_id = line_id + "+wandb" if line_id in seen else line_id  # the W&B example repeats doom_basic
        seen.add(line_id)
        out.append(pytest.param(module, args, id=line_id))
    return out


def lowered(args, train_dir):
    """The flags with LOWERED's values (a budget the line lacks added), train_dir in `train_dir`."""
    low = dict(LOWERED)
    servers = [a.split("=", 1)[1] for a in args if a.startswith("--policy_workers_per_policy=")]
    if servers:  # each inference server serves one worker at least: as many workers as servers
        low["num_workers"] = servers[0]
    out = [f"--{name}={low[name]}" if name in low else a for a in args for name in [a[2:].split("=", 1)[0]]]
    budget = "--sample_env_frames" if any(a.startswith("--algo=DUMMY") for a in args) else "--train_for_env_steps"
    given = {a.split("=", 1)[0] for a in out}
    out += [f for f in (f"{budget}={LOWERED[budget[2:]]}", "--train_for_seconds=3") if f.split("=")[0] not in given]
    return out + [f"--train_dir={train_dir}"]


def test_the_readme_lines_are_found():
    ids = [p.id for p in command_lines()]
    assert len(ids) == 18 and "train_appo:doom_battle" in ids and "run:run" in ids, ids
    assert set(IN_CI) <= {p.id for p in trained_lines()} and len(trained_lines()) == 13


@pytest.mark.parametrize("module, args", command_lines())
def test_translated_or_refused_with_a_reason_per_flag(module, args):
    stage = "enjoy" if module.endswith("enjoy_appo") else "train"
    name = next((a.split("=", 1)[1] for a in args if a.startswith("--experiment=")), "runner")
    if name in REFUSED:
        with pytest.raises(ConfigError) as info:
            translate_argv(args, CONF, stage)
        message = str(info.value)
        assert f"{len(REFUSED[name])} Sample Factory flags cannot be translated" in message, message
        for flag in REFUSED[name]:
            line = next((x for x in message.splitlines() if x.strip().startswith(flag)), "")
            assert "is not allowed: " in line and len(line.split("is not allowed: ", 1)[1]) > 20, message
        return
    translated = translate_argv(args, CONF, stage).argv
    assert not any(a.startswith("--") and a not in ("--help",) for a in translated), translated
    if "--ppo_epochs=1" in args:
        assert "algo.num_epochs=1" in translated
    if "--hidden_size=256" in args:
        assert "model.rnn_size=256" in translated and "model.encoder_conv_mlp_layers=[256]" in translated


# Trained in CI (slow): one of each kind, a few seconds each; the others with -m long.
IN_CI = ("train_appo:doom_basic", "train_appo:doom_duel_bots", "train_appo:doom_battle_appo_fps_20_32",
         "run_algorithm:dummy_sampler")


def trained_lines():
    """The training lines (not --help, not DMLab's, which is refused), those outside IN_CI marked long."""
    out = []
    for p in command_lines():
        module, args = p.values
        if module.endswith("enjoy_appo") or "--help" in args or p.id.startswith("run:") or \
                any(a.startswith("--encoder_custom") for a in args):
            continue
        out.append(p if p.id in IN_CI else pytest.param(*p.values, id=p.id, marks=pytest.mark.long))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("module, args", trained_lines())
def test_trained_for_a_few_seconds(module, args, tmp_path, monkeypatch):
    pytest.importorskip("vizdoom", reason="the 1.x README's lines are Doom's (DMLab's is refused): the doom extra")
    monkeypatch.setenv("WANDB_MODE", "offline")  # the W&B line: no network in tests
    translated = translate_argv(lowered(args, tmp_path), CONF).argv
    checked = check_command_line(translated, CONF)
    summary = train(checked.cfg, checked)
    assert summary["env_steps"] > 0 and summary["stop_reason"], summary
    if "--algo=DUMMY_SAMPLER" not in args:
        assert summary["policy_version"] > 0, summary  # learned: at least one update
