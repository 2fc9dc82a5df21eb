"""Real trainings with several policies: per-policy scalars, summary and checkpoint, resume
of every policy, the opponent pool on disk across a resume, and bad input refused."""

import json
from pathlib import Path

import pytest
import torch

from sf_hydra.app.train import check_config, train
from sf_hydra.config import ConfigError
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import make_cfg

TOY_2 = ("env=gym/multi_agent_toy", "env.kwargs.num_agents=2")


def _run_dir(cfg) -> Path:
    return Path(cfg.train_dir) / cfg.experiment


@pytest.mark.slow
def test_two_policies_train_report_and_resume_separately(tmp_path):
    cfg = make_cfg(tmp_path, "algo.num_policies=2", "train_for_env_steps=6000")
    first = train(cfg)
    run = _run_dir(cfg)
    policies = first["policies"]
    assert [p["policy"] for p in policies] == [0, 1]
    # The budget holds for each policy's own env steps; together they are the run's frames.
    assert all(p["env_steps"] >= 6000 and p["policy_version"] > 0 and p["episodes"] > 0 for p in policies)
    assert sum(p["env_steps"] for p in policies) == first["env_steps"]
    assert sum(p["policy_version"] for p in policies) == first["policy_version"]
    scalars = read_scalars(run)
    for k in (0, 1):
        for tag in ("loss/policy", "policy_lag/avg", "learner/policy_version", "episode/return", "perf/env_steps"):
            assert f"policy_{k}/{tag}" in scalars, f"policy_{k}/{tag}"
    assert {"episode/return", "perf/fps", "perf/env_steps"} <= set(scalars)  # the run's totals
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    assert [p["version"] for p in ckpt["sf_hydra"]["policies"]] == [p["policy_version"] for p in policies]
    assert len(ckpt["optimizer_states"]) == 2
    w0, w1 = (ckpt["state_dict"][f"policies.{k}.value_head.weight"] for k in (0, 1))
    assert not torch.equal(w0, w1), "two policies, two sets of weights"

    second = train(make_cfg(tmp_path, "algo.num_policies=2", "train_for_env_steps=12000"))
    for before, after in zip(policies, second["policies"]):
        assert after["policy_version"] > before["policy_version"]
        assert after["env_steps"] >= 12000
    # A resume with another number of policies is refused, naming the key.
    with pytest.raises(ConfigError, match="algo.num_policies"):
        train(make_cfg(tmp_path, "algo.num_policies=3", "train_for_env_steps=20000"))


@pytest.mark.slow
def test_opponent_pool_is_kept_on_disk_and_survives_resume(tmp_path):
    overrides = (*TOY_2, "selfplay.pool_size=2", "selfplay.snapshot_every_env_steps=1500",
                 "selfplay.opponent_sampling=hard")
    cfg = make_cfg(tmp_path, *overrides, "train_for_env_steps=5000")
    train(cfg)
    pool_dir = _run_dir(cfg) / "selfplay"
    index = json.loads((pool_dir / "pool.json").read_text())
    entries = [e for e in index["slots"] if e is not None]
    assert len(entries) == 2 and index["generation"] >= 2  # a full pool replaced its oldest
    files = {e["file"]: (pool_dir / e["file"]).read_bytes() for e in entries}
    assert sorted(p.name for p in pool_dir.glob("snapshot_*.pt")) == sorted(files)
    # A snapshot holds the policy as it was when it joined: not the final weights.
    final = torch.load(_run_dir(cfg) / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    oldest = min(entries, key=lambda e: e["generation"])
    snap = torch.load(pool_dir / oldest["file"], weights_only=True)
    assert not torch.equal(snap["value_head.weight"], final["policies.0.value_head.weight"])
    scalars = read_scalars(_run_dir(cfg))
    assert "selfplay/vs_pool_win_rate" in scalars and "selfplay/vs_pool_loss_rate" in scalars
    # The league: every player rated from its games, head to head, and the pool's odds (hard: below 1
    # once a policy played a snapshot).
    ratings = json.loads((pool_dir / "ratings.json").read_text())
    rated = {p["player"]: p for p in ratings["players"]}
    assert {"policy_0", *(f"snapshot_{e['generation']:06d}" for e in entries)} <= set(rated)
    assert ratings["games_rated"] > 0 and rated["policy_0"]["games"] > 0
    h2h = ratings["head_to_head"]["policy_0"]
    assert sum(sum(r.values()) for r in h2h.values()) == rated["policy_0"]["games"]
    odds = [rated[f"snapshot_{e['generation']:06d}"]["odds"][0] for e in entries]
    assert all(0 < o <= 1 for o in odds) and min(odds) < 1
    assert "selfplay/rating/policy_0" in scalars and "selfplay/games_rated" in scalars

    train(make_cfg(tmp_path, *overrides, "train_for_env_steps=9000"))
    resumed = json.loads((pool_dir / "pool.json").read_text())
    assert resumed["generation"] > index["generation"], "snapshot numbering goes on after the resume"
    again = json.loads((pool_dir / "ratings.json").read_text())
    assert again["games_rated"] > ratings["games_rated"], "the league goes on after the resume"
    assert sum(h["wins"] + h["draws"] + h["losses"] for h in again["head_to_head"]["policy_0"].values()) > \
        sum(h["wins"] + h["draws"] + h["losses"] for h in h2h.values())
    for e in resumed["slots"]:  # a snapshot file that stayed in the pool never changed
        if e["file"] in files:
            assert (pool_dir / e["file"]).read_bytes() == files[e["file"]]


@pytest.mark.parametrize("overrides, key", [
    (("algo.num_policies=0",), "algo.num_policies"),
    (("selfplay.latest_prob=1.5",), "selfplay.latest_prob"),
    (("selfplay.pool_size=-1",), "selfplay.pool_size"),
    (("selfplay.snapshot_every_env_steps=0",), "selfplay.snapshot_every_env_steps"),
    (("hardware.batched_sampling=true", "algo.num_policies=3"), "algo.num_policies"),
    (("hardware.batched_sampling=true", "selfplay.pool_size=2"), "selfplay.pool_size"),
    (("selfplay.opponent_sampling=hard",), "selfplay.opponent_sampling"),  # no pool to weigh
    (("selfplay.pool_size=2", "selfplay.pfsp_exponent=0"), "selfplay.pfsp_exponent"),
])
def test_bad_policy_settings_are_refused_naming_the_key(tmp_path, overrides, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        check_config(make_cfg(tmp_path, *overrides))


def test_a_pool_for_an_env_without_opponent_seats_is_refused_before_workers_start(tmp_path):
    cfg = make_cfg(tmp_path, "selfplay.pool_size=2", "train_for_env_steps=2000")
    with pytest.raises(ConfigError, match=r"selfplay\.pool_size.*CartPole-v1.*seats 1 agent"):
        train(cfg)
    assert not (_run_dir(cfg) / "checkpoints").exists()


LEARNING_TWO = ("hardware.num_envs_per_worker=16", "algo.rollout=32", "algo.batch_size=512", "algo.num_policies=2",
                "logger.stats_avg=50")


@pytest.mark.slow  # ~17 s here (to 200: 15-67 s); the long test below takes both to 450
def test_two_policies_each_learn_cartpole(tmp_path):
    """Each policy learns from its own transitions with its own optimizer: the run stops only when
    each one's last 50 episodes average 150 (random play: ~22), well within its budget."""
    summary = train(make_cfg(tmp_path, *LEARNING_TWO, "train_for_env_steps=300000", "train_until_avg_return=150",
                             "train_for_seconds=240"))  # a policy that does not learn fails within 4 min
    assert summary["stop_reason"] == "train_until_avg_return=150 reached", summary
    assert [p["policy"] for p in summary["policies"]] == [0, 1]
    assert all(p["avg_return"] >= 150 and p["env_steps"] < 300000 for p in summary["policies"]), summary["policies"]


@pytest.mark.long  # ~95 s alone, ~6 min on a loaded machine: run on purpose (python -m pytest -m long)
def test_two_policies_each_solve_cartpole(tmp_path):
    cfg = make_cfg(tmp_path, *LEARNING_TWO, "train_for_env_steps=1500000", "train_until_avg_return=450")
    summary = train(cfg)
    assert all(p["avg_return"] >= 450 for p in summary["policies"]), summary["policies"]
