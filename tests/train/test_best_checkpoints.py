"""Best and milestone checkpoints on real CartPole runs, read back from the files: the best checkpoint holds
the highest `save_best_metric` of every checkpoint written (and of every logged new best), `enjoy.py
load_checkpoint_kind=best` plays it, a resume from it works, milestones survive `keep_checkpoints` pruning
and resumes; bad input names its key."""

import json
import logging
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from sf_hydra.app.train import check_config, train
from sf_hydra.config import ConfigError
from tests.conftest import REPO_ROOT, make_cfg

BEST = ("save_best_every_sec=0.3", "save_best_after=2000", "save_every_sec=0.5", "keep_checkpoints=1",
        "save_milestones_sec=0.7")
NEW_BEST = re.compile(r"new best checkpoint of policy (\d+): reward=(\S+) at (\d+) env steps")


def _load(path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def _window_mean(ckpt: dict, policy: int = 0) -> float:
    """The average return over the policy's episode window, as the checkpoint saved it."""
    return float(np.mean(ckpt["sf_hydra"]["policies"][policy]["episode_returns"]))


def _enjoy(tmp_path, *overrides):
    cmd = [sys.executable, str(REPO_ROOT / "enjoy.py"), f"train_dir={tmp_path}", "experiment=test", *overrides]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_best_checkpoint_has_the_highest_metric_milestones_survive_and_enjoy_plays_it(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="sf_hydra")
    # milestones every 0.3 s here: CartPole with raw inputs trained 8000 steps in under 0.6 s on a quiet CI
    # machine (one milestone only), so 20000 (a few seconds there, ~15 s on a loaded 2-core machine)
    train(make_cfg(tmp_path, "train_for_env_steps=20000", *BEST, "save_milestones_sec=0.3"))
    folder = tmp_path / "test" / "checkpoints"
    best = _load(folder / "best_p0.ckpt")
    info = best["sf_hydra_best"]
    assert info["policy"] == 0 and info["metric"] == "reward"
    # What the file records is its own state: the env steps and the average return of its episode window.
    assert info["env_steps"] == best["sf_hydra"]["env_steps"] >= 2000
    assert info["value"] == pytest.approx(_window_mean(best))
    # The logged new bests rise, and the last one is the file's.
    logged = [(float(v), int(s)) for _, v, s in NEW_BEST.findall(caplog.text)]
    assert logged and [v for v, _ in logged] == sorted({v for v, _ in logged})
    assert logged[-1] == (pytest.approx(info["value"]), info["env_steps"])
    # Every other checkpoint written past save_best_after holds a lower or equal metric (a best check runs
    # before each save): the periodic ones kept, last.ckpt and the milestones.
    milestones = sorted((folder / "milestones").glob("checkpoint_*.ckpt"))
    others = [_load(p) for p in [folder / "last.ckpt", *folder.glob("checkpoint_*.ckpt"), *milestones]]
    later = [c for c in others if c["sf_hydra"]["env_steps"] >= 2000]
    assert later and max(_window_mean(c) for c in later) <= info["value"]
    # Milestones: kept although keep_checkpoints=1 pruned the periodic ones, and each loads.
    assert len(list(folder.glob("checkpoint_*.ckpt"))) == 1
    assert len(milestones) >= 2, sorted(p.name for p in folder.rglob("*.ckpt"))
    assert len({c["sf_hydra"]["env_steps"] for c in others[-len(milestones):]}) == len(milestones)

    result = _enjoy(tmp_path, "load_checkpoint_kind=best", "episodes=1", "max_episode_steps=20")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "test" / "enjoy" / "eval.json").read_text())
    assert report["checkpoint"] == str(folder / "best_p0.ckpt")

    # A resume (latest) keeps the milestones and the best value: a new best only when it beats the saved one.
    caplog.clear()
    train(make_cfg(tmp_path, "train_for_env_steps=24000", *BEST))
    assert set(milestones) <= set((folder / "milestones").glob("checkpoint_*.ckpt"))
    after = _load(folder / "best_p0.ckpt")["sf_hydra_best"]
    assert after["value"] >= info["value"]
    assert all(float(v) > info["value"] for _, v, _ in NEW_BEST.findall(caplog.text))

    # A resume from the best checkpoint starts from its env steps.
    caplog.clear()
    summary = train(make_cfg(tmp_path, "train_for_env_steps=28000", "load_checkpoint_kind=best", *BEST))
    assert f"resuming from the best checkpoint {folder / 'best_p0.ckpt'} ({after['env_steps']} env steps)" \
        in caplog.text
    assert summary["env_steps"] >= 28000


@pytest.mark.slow
def test_each_policy_keeps_its_own_best(tmp_path):
    train(make_cfg(tmp_path, "algo.num_policies=2", "train_for_env_steps=3000", "save_best_after=500",
                   "save_best_every_sec=0.3"))
    folder = tmp_path / "test" / "checkpoints"
    for k in (0, 1):
        ckpt = _load(folder / f"best_p{k}.ckpt")
        info = ckpt["sf_hydra_best"]
        assert info["policy"] == k and info["env_steps"] == ckpt["sf_hydra"]["policies"][k]["env_steps"] >= 500
        assert info["value"] == pytest.approx(_window_mean(ckpt, k))


@pytest.mark.slow
def test_no_best_checkpoint_yet_is_named_by_enjoy_and_by_a_resume(tmp_path):
    train(make_cfg(tmp_path, "hardware.num_workers=1", "train_for_env_steps=1000"))  # save_best_after: 100000
    assert not list((tmp_path / "test" / "checkpoints").glob("best_*"))
    result = _enjoy(tmp_path, "load_checkpoint_kind=best")
    out = result.stdout + result.stderr
    assert result.returncode == 2 and "load_checkpoint_kind='best' is not allowed" in out, out
    assert "no best checkpoint of policy 0 yet" in out and "save_best_after=100000" in out, out
    with pytest.raises(ConfigError, match="load_checkpoint_kind='best'.*no best checkpoint yet"):
        train(make_cfg(tmp_path, "hardware.num_workers=1", "train_for_env_steps=2000", "load_checkpoint_kind=best"))


@pytest.mark.parametrize("overrides, key, says", [
    (("save_best_metric=frags",), "save_best_metric", "reward, true_objective, episode/return, len"),
    (("save_best_metric=selfplay/vs_pool_win_rate",), "save_best_metric", "selfplay.pool_size > 0"),
    (("save_milestones_sec=0",), "save_milestones_sec", "-1 (no milestones)"),
    (("save_best_after=-5",), "save_best_after", ">= 0"),
    (("save_best_every_sec=0",), "save_best_every_sec", "> 0"),
])
def test_bad_checkpoint_keys_are_named_before_anything_starts(tmp_path, overrides, key, says):
    with pytest.raises(ConfigError) as info:
        check_config(make_cfg(tmp_path, *overrides))
    assert info.value.key == key and says in str(info.value), str(info.value)


def test_a_statistic_the_env_reports_may_be_the_best_metric(tmp_path):
    """The learner keeps each policy's env-reported episode statistics (env.episode_stats):
    one of them may rank best checkpoints; a name the env does not report is refused."""
    pytest.importorskip("vizdoom", reason="the doom extra (vizdoom) is not installed")
    check_config(make_cfg(tmp_path, "env=doom/basic", "env.episode_stats=[KILLCOUNT]", "save_best_metric=KILLCOUNT"))
    with pytest.raises(ConfigError, match="save_best_metric=.FRAGCOUNT. is not allowed"):
        check_config(make_cfg(tmp_path, "env=doom/basic", "env.episode_stats=[]", "save_best_metric=FRAGCOUNT"))


def test_train_py_refuses_an_unreported_metric_with_its_name(tmp_path):
    result = subprocess.run([sys.executable, str(REPO_ROOT / "train.py"), f"train_dir={tmp_path}",
                             "save_best_metric=kills"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "save_best_metric='kills' is not allowed" in result.stderr, result.stderr
