"""Evaluation during training on a real CartPole run (its own process, real envs and files): every 20000 env
steps each evaluation's games land in eval/evaluations.jsonl and as eval/* scalars in TensorBoard at the env
steps where the weights were taken; best checkpoints follow save_best_metric=eval/return; the sweep report
plots eval/return."""

import json
import re

import pytest
import torch
from omegaconf import OmegaConf

from sf_hydra.app.enjoy import load_policy
from sf_hydra.app.train import train
from sf_hydra.core.seeding import env_seed
from sf_hydra.envs import make_env
from sf_hydra.evaluation.episodes import as_multi_agent, episode_record, play_episodes
from sf_hydra.report.__main__ import main as report
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import make_cfg

EVERY = 20_000


@pytest.mark.slow
def test_cartpole_evaluations_reach_jsonl_tensorboard_and_best_checkpoints(tmp_path):
    summary = train(make_cfg(tmp_path, "train_for_env_steps=40000", f"eval.every_env_steps={EVERY}", "eval.episodes=4",
                             "eval.max_episode_steps=200", "save_best_metric=eval/return", "save_best_after=0",
                             "save_best_every_sec=0.2", "logger.stats_avg=20", "eval.video_every=2",
                             "train_until_avg_return=null",  # CartPole's 480 over 20 episodes comes within 30k steps
                             "eval.video_frames=30", "eval.video_format=gif"))
    run = tmp_path / "test"
    records = [json.loads(line) for line in (run / "eval" / "evaluations.jsonl").read_text().splitlines()]
    # one evaluation per 20000 env steps passed (the last one at the end of the budget waited for)
    assert [r["evaluation"] for r in records] == list(range(len(records))) and len(records) >= 2
    steps = [r["env_steps"] for r in records]
    assert all(s // EVERY == k + 1 for k, s in enumerate(steps)), steps
    assert steps[-1] <= summary["env_steps"]
    for r in records:
        (p,) = r["policies"]
        assert len(p["episodes"]) == 4 and all(1 <= e["length"] <= 200 for e in p["episodes"])
        assert p["return"] == pytest.approx(sum(e["return"] for e in p["episodes"]) / 4)
        assert p["version"] >= 1  # trained weights, not the initial ones
    # a video of the first game every 2 evaluations: evaluation 0's, not evaluation 1's
    assert records[0]["video"] == str(run / "eval" / "videos" / "evaluation_00000.gif")
    assert (run / "eval" / "videos" / "evaluation_00000.gif").stat().st_size > 0 and records[1]["video"] is None
    # the same 4 starts every evaluation, seeded apart from every training env's seed
    assert len({tuple(r["seeds"]) for r in records}) == 1
    training_seeds = {env_seed(0, w, i) for w in range(2) for i in range(4)}
    assert not training_seeds & set(records[0]["seeds"])

    scalars = read_scalars(run)
    logged = {s.step: s.value for s in scalars["eval/return"]}
    assert logged == {r["env_steps"]: pytest.approx(r["policies"][0]["return"]) for r in records}
    assert [s.step for s in scalars["eval/length"]] == steps

    # the best checkpoint is the best evaluation's (save_best_after=0: every evaluation is offered)
    best = torch.load(run / "checkpoints" / "best_p0.ckpt", map_location="cpu", weights_only=True)["sf_hydra_best"]
    top = max(records, key=lambda r: r["policies"][0]["return"])
    assert best["metric"] == "eval/return"
    assert best["value"] == pytest.approx(top["policies"][0]["return"])
    assert best["evaluated_run_env_steps"] == top["env_steps"] <= best["run_env_steps"]
    # it holds the weights that evaluation played (training went on meanwhile), and enjoy.py plays them: the same
    # seeds, deterministic, give the evaluation's very games
    assert best["evaluated_policy_version"] == top["policies"][0]["version"] <= best["policy_version"]
    train_cfg = OmegaConf.load(run / "config.yaml")
    env = as_multi_agent(make_env(train_cfg.env, seed=top["seeds"][0]))
    model = load_policy(train_cfg, run / "checkpoints" / "best_p0.ckpt", env.observation_space, env.action_space)
    with torch.no_grad():
        games = play_episodes([env], [(model, 0)], top["seeds"], True, 200)
        replayed = [episode_record(seats) for _, seats, _ in games]
    env.close()
    assert replayed == top["policies"][0]["episodes"]

    # a resume goes on with the schedule and the numbering (the callback's state is in the checkpoint)
    train(make_cfg(tmp_path, "train_for_env_steps=60000", f"eval.every_env_steps={EVERY}", "eval.episodes=4",
                   "eval.max_episode_steps=200", "save_best_metric=eval/return", "save_best_after=0",
                   "save_best_every_sec=0.2", "logger.stats_avg=20", "train_until_avg_return=null"))
    after = [json.loads(line) for line in (run / "eval" / "evaluations.jsonl").read_text().splitlines()]
    assert after[:len(records)] == records and len(after) > len(records)
    assert [r["evaluation"] for r in after] == list(range(len(after)))
    assert all(r["env_steps"] // EVERY == k + 1 for k, r in enumerate(after)), [r["env_steps"] for r in after]

    # the sweep report reads the eval curves like any other tag
    assert report([str(tmp_path), "--tag", "eval/return", "--out", str(tmp_path / "eval.png")]) == 0
    assert (tmp_path / "eval.png").stat().st_size > 0


@pytest.mark.slow
def test_the_target_return_can_go_by_evaluation(tmp_path):
    """eval.stop_on_eval_return: the run stops on an evaluation's mean return, not on the training window's."""
    summary = train(make_cfg(tmp_path, "eval.every_env_steps=1000", "eval.episodes=2", "train_for_env_steps=100000",
                             "train_until_avg_return=60", "eval.stop_on_eval_return=true"))
    records = [json.loads(line) for line in (tmp_path / "test" / "eval" / "evaluations.jsonl").read_text().splitlines()]
    reason = re.fullmatch(r"train_until_avg_return=60 reached by evaluation (\d+) .*", summary["stop_reason"])
    returns = [r["policies"][0]["return"] for r in records]
    stopped_by = int(reason[1])
    assert returns[stopped_by] >= 60 and all(r < 60 for r in returns[:stopped_by])  # the first one that reached it
    assert summary["env_steps"] < 100000


@pytest.mark.slow
def test_pbt_ranks_by_evaluation(tmp_path):
    """pbt.target_objective=eval/return: PBT ranks each policy by its latest evaluation (the values in
    eval/evaluations.jsonl). A two-policy run, ~35 s on the 2-core machine: the only CI run of this path."""
    train(make_cfg(tmp_path, "algo.num_policies=2", "pbt.with_pbt=true", "pbt.target_objective=eval/return",
                   "pbt.period_env_steps=1000", "pbt.start_mutation=1000", "eval.every_env_steps=1000",
                   "eval.episodes=2", "eval.max_episode_steps=50", "train_for_env_steps=8000",
                   "train_until_avg_return=null"))
    run = tmp_path / "test"
    records = [json.loads(line) for line in (run / "eval" / "evaluations.jsonl").read_text().splitlines()]
    evaluated = {(p["policy"], p["return"]) for r in records for p in r["policies"]}
    looks = [json.loads(line) for line in (run / "pbt" / "events.jsonl").read_text().splitlines()]
    assert looks and all(e["target_objective"] == "eval/return" for e in looks)
    # A policy not evaluated yet has no objective (None): left out of the ranking (learner/pbt_rules.py)
    objectives = [(int(k), v) for e in looks for k, v in e["objectives"].items() if v is not None]
    assert objectives and all(o in evaluated for o in objectives)
    assert any(not e["action"].startswith("skipped") for e in looks), looks
