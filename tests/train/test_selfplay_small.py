"""The small-machine duel self-play preset (experiments/doom_duel_selfplay_small.yaml) on this 2-core CPU,
on a shorter budget: snapshots join the opponent pool, take seats in games, and those games give each policy
its win, draw and loss rates against the pool."""

import json
from pathlib import Path

import pytest

from tests.conftest import compose_cfg
from tests.experiments.test_experiment_configs import skip_without_extra

PRESET = "doom_duel_selfplay_small"


@pytest.mark.slow
def test_small_duel_selfplay_fills_the_pool_and_plays_it(tmp_path):
    from sf_hydra.app.train import train
    from sf_hydra.core.metric_names import OUTCOME_RATES

    skip_without_extra(PRESET)
    # The preset as shipped, with shorter matches (12 s of game), an earlier snapshot, a shorter budget, and every
    # opponent seat a snapshot's once the pool has one (selfplay.latest_prob=0). The budget is in frames, not
    # seconds: under CI's load 60 s gave 6,060 frames a policy and no game against the pool. The preset's
    # latest_prob=0.5 left the outcome rates to chance: a game is against the pool with odds 1/2 and then a given
    # policy's with odds 1/2, so with ~10 games after the first snapshot a policy had none in 0.75^10 = 6% of runs
    # (CI failed twice so). With latest_prob=0 every game after the first snapshot is against the pool: measured
    # here, 14-17 such games (7-10 a policy) in 64-68 s, so a policy has none in about 2^-14 of runs.
    cfg = compose_cfg(f"+experiment={PRESET}", f"train_dir={tmp_path}", "env.episode_timeout=420",
                      "selfplay.snapshot_every_env_steps=1500", "selfplay.latest_prob=0",
                      "train_for_env_steps=6000", "train_for_seconds=600")
    assert cfg.algo.num_policies == 2 and cfg.selfplay.pool_size > 0 and cfg.hardware.num_workers == 2
    train(cfg)
    run = Path(cfg.train_dir) / cfg.experiment
    summary = json.loads((run / "summary.json").read_text())
    index = json.loads((run / "selfplay" / "pool.json").read_text())
    snapshots = [e for e in index["slots"] if e is not None]
    assert snapshots and index["generation"] >= len(snapshots), index
    assert all((run / "selfplay" / e["file"]).is_file() for e in snapshots)
    for policy in summary["policies"]:
        assert policy["episodes"] > 0, policy
        rates = [policy.get(name) for name in OUTCOME_RATES]
        assert None not in rates and abs(sum(rates) - 1) < 1e-6, policy  # games against the pool ended
    # Who beats whom: both policies and the pool's snapshots rated from their games.
    ratings = json.loads((run / "selfplay" / "ratings.json").read_text())
    rated = {p["player"]: p for p in ratings["players"]}
    assert {"policy_0", "policy_1"} <= set(rated) and any(name.startswith("snapshot_") for name in rated), rated
    assert all(rated[f"policy_{k}"]["games"] > 0 for k in (0, 1)) and ratings["games_rated"] > 0
