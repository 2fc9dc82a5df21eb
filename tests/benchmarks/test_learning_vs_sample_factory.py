"""benchmarks/learning_vs_sample_factory.py's own arithmetic: Sample Factory's TensorBoard scalars read
back from a real event file in its `.summary/0` layout, and the summary row (medians, ranges, the gap
in units of SF's spread) from hand-worked run results."""

import sys
from pathlib import Path

from torch.utils.tensorboard import SummaryWriter

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from learning_vs_sample_factory import ENVS, read_sf_scalars, sf_command, summary_rows  # noqa: E402
from vs_sample_factory import RunResult, parse_sf_log  # noqa: E402


def test_sf_scalars_are_read_in_step_order(tmp_path):
    summary = tmp_path / "sf_0" / ".summary" / "0"
    writer = SummaryWriter(str(summary))
    for step, value in ((2048, 0.25), (4096, 0.5), (8192, 0.75)):
        writer.add_scalar("policy_stats/avg_true_objective", value, step)
    writer.close()
    points = read_sf_scalars(summary, "policy_stats/avg_true_objective")
    assert [(s, v) for _, s, v in points] == [(2048.0, 0.25), (4096.0, 0.5), (8192.0, 0.75)]
    assert read_sf_scalars(summary, "no/such_tag") == []
    assert read_sf_scalars(tmp_path / "missing", "policy_stats/avg_true_objective") == []


def test_sf_log_returns_pair_each_reward_line_with_the_frames_reported_before_it():
    """The fallback where SF writes no policy_stats scalars (its Atari runs): its log's lines."""
    # The lines as SF 2.1.1 prints them (colour codes included), from a real Atari run's log.
    log = ("\x1b[36m[2026-11-26 08:43:53,316][17602] Fps is (10 sec: 409.6, 60 sec: 204.8, 300 sec: 170.1)."
           " Total num frames: 503808. Throughput: 0: 61.2. Samples: 3780.\x1b[0m\n"
           "\x1b[36m[2026-11-26 08:43:58,316][17602] Avg episode reward: [(0, '-18.225')]\x1b[0m\n"
           "\x1b[36m[2026-11-26 08:44:03,316][17602] Fps is (10 sec: 0.0). Total num frames: 507904.\x1b[0m\n"
           "\x1b[36m[2026-11-26 08:44:03,316][17602] Avg episode reward: [(0, '-17.5')]\x1b[0m\n")
    assert [(s, v) for _, s, v in parse_sf_log(log)[1]] == [(503808.0, -18.225), (507904.0, -17.5)]
    assert parse_sf_log("[2026-11-26 08:43:58,316][17602] Avg episode reward: [(0, '1.0')]")[1] == []  # no report yet


def test_summary_row_medians_ranges_and_gap():
    results = [RunResult("SF", 0, True, last_return=30.0), RunResult("ours", 0, True, last_return=60.0),
               RunResult("SF", 1, True, last_return=40.0), RunResult("ours", 1, True, last_return=70.0),
               RunResult("SF", 2, True, last_return=38.0), RunResult("ours", 2, True, last_return=None)]
    [row] = summary_rows("doom/basic", 300_000, results)
    assert row[:6] == ["doom/basic", "300,000", "3", "38.0 [30.0, 40.0]", "65.0 [60.0, 70.0]", "+2.70"]
    assert row[6] == "30.0/60.0  40.0/70.0  38.0/-"  # a run that reported nothing shows as "-"


def test_both_sides_get_the_same_workers_budget_and_seed():
    case = ENVS["doom/basic"]
    cmd = sf_command("/venv/bin/python", case, Path("/runs"), seed=3, env_steps=300_000)
    assert cmd[0] == "/venv/bin/python"
    assert "--env=doom_basic" in cmd and "--seed=3" in cmd and "--train_for_env_steps=300000" in cmd
    assert f"--num_workers={case.workers[0]}" in cmd and f"--num_envs_per_worker={case.workers[1]}" in cmd
    assert case.sf_reward_scaling == 0.01  # SF's doom_basic spec scales rewards: undone before comparing
