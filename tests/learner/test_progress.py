"""The progress figures with several policies and budgets: the ETA names the budget that stops the run first
(train_for_seconds, or each policy's env-step budget at the least-trained policy's own rate; none without a
budget), the policy lag is over every policy, and the line and the bar follow the least-trained policy."""

from __future__ import annotations

import io
from types import SimpleNamespace

from sf_hydra.config.schema import LoggerConfig
from sf_hydra.learner.callbacks import Summaries
from sf_hydra.learner.progress import (
    ConsoleBar,
    Eta,
    ProgressFigures,
    first_budget_eta,
    lag_over_policies,
    least_trained,
    step_budget,
)

INF = float("inf")


def test_eta_is_the_first_budget_to_end_and_names_it():
    assert first_budget_eta(1000, 11_000, 100.0, 0.0, INF) == Eta(100, "11000 env steps")
    assert first_budget_eta(1000, 11_000, 100.0, 0.0, 1e10, policies=2) == Eta(100, "11000 env steps per policy")
    assert first_budget_eta(1000, 11_000, 100.0, 50.0, 80.0) == Eta(30, "train_for_seconds=80")  # time ends first
    # No env-step budget: the time budget's ETA, however fast the steps come.
    assert first_budget_eta(1000, None, 1e6, 10.0, 600.0) == Eta(590, "train_for_seconds=600")
    assert first_budget_eta(1000, None, 100.0, 0.0, 1e10) is None  # the schema's defaults: no budget, no ETA
    assert first_budget_eta(1000, 11_000, 0.0, 0.0, INF) is None  # no rate yet: unknown
    assert first_budget_eta(1000, 10**9, 1.0, 0.0, INF) is None  # beyond a year: n/a
    assert first_budget_eta(12_000, 11_000, 100.0, 0.0, INF) == Eta(0.0, "11000 env steps")  # overshot: now


def test_no_env_step_budget_is_the_schema_default():
    assert step_budget(1e10) is None and step_budget(10_000_000_000) is None and step_budget(None) is None
    assert step_budget(480_000) == 480_000 and step_budget(480_000.0) == 480_000


def test_lag_is_over_every_policy():
    metrics = [{"policy_lag/avg": 1.0, "policy_lag/max": 3.0}, {"policy_lag/avg": 5.0, "policy_lag/max": 9.0},
               {}]  # policy 2 not trained yet: left out
    assert lag_over_policies(metrics) == (3.0, 9.0)
    assert lag_over_policies([{}, {}]) == (0.0, 0.0)


def test_least_trained_policy_is_the_one_with_fewest_own_steps():
    assert least_trained([500, 200, 200]) == (1, 200)
    assert least_trained([7]) == (0, 7)


def _figures(**changes) -> ProgressFigures:
    base = dict(env_steps=727_000, budget_steps=480_000, fps={10: 1000.0, 60: 1000.0, 300: 900.0}, avg_return=20.0,
                episodes=50, lag_avg=1.5, lag_max=4.0, version=40, eta=Eta(190.0, "480000 env steps per policy"),
                policies=3, least_policy=2, least_steps=240_000)
    return ProgressFigures(**{**base, **changes})


def test_line_names_the_least_trained_policy_and_the_budget():
    line = _figures().line()
    assert line.startswith("env steps 727000 | FPS 1000 (10 s)"), line  # the pattern scripts read
    assert "least-trained policy 2: 240000 of 480000 env steps" in line, line
    assert line.endswith("ETA 0:03:10 to 480000 env steps per policy"), line
    assert "least-trained" not in _figures(policies=1, least_policy=0, least_steps=727_000).line()
    assert "least-trained policy 2: 240000 env steps |" in _figures(budget_steps=None, eta=None).line()
    assert _figures(eta=None).line().endswith("ETA n/a")
    assert _figures(eta=Eta(190.0, "train_for_seconds=600")).line().endswith("ETA 0:03:10 to train_for_seconds=600")


def test_bar_counts_the_least_trained_policy_against_each_policy_budget():
    stream = io.StringIO()
    bar = ConsoleBar(480_000, 0, stream=stream)
    try:
        bar.show(_figures())  # the run made 727000 env steps; the least-trained policy 240000 of 480000
        assert bar.bar.n == 240_000 and bar.bar.total == 480_000
        shown = stream.getvalue().split("\r")[-1]
        assert shown.lstrip().startswith("50%|") and "least-trained policy 2" in shown, shown
        assert "ETA 0:03:10 to 480000 env steps per policy" in shown, shown
    finally:
        bar.close()


def _learner(steps, lags, train_seconds=0.0):
    stats = [SimpleNamespace(env_steps=s, metrics={"policy_lag/avg": a, "policy_lag/max": m} if a is not None else {})
             for s, (a, m) in zip(steps, lags)]
    return SimpleNamespace(stats=stats, env_steps=sum(steps), train_seconds=train_seconds, avg_return=lambda: None,
                           episodes_total=0, policy_version=0)


def test_summaries_eta_follows_the_least_trained_policy_rate():
    """Policy 0 makes 3000 env steps/s, policy 1 1000/s: the run's FPS (4000) over two policies would say
    2000 per policy; the budget (each policy's 480000) waits for policy 1 at its own 1000 per second."""
    s = Summaries(LoggerConfig(log_interval_sec=1, experiment_summaries_interval=10, progress="lines"),
                  budget_steps=480_000, budget_seconds=1e10)
    lags = [(1.0, 2.0), (3.0, 8.0)]
    for t in range(0, 121, 10):
        s._measure(float(t), _learner([3000 * t, 1000 * t], lags))
    fig = s.figures(_learner([360_000, 120_000], lags))
    assert (fig.least_policy, fig.least_steps, fig.budget_steps) == (1, 120_000, 480_000)
    assert fig.eta == Eta(360.0, "480000 env steps per policy")
    assert (fig.lag_avg, fig.lag_max) == (2.0, 8.0)  # over both policies, not policy 0's alone
    # A time budget that ends sooner is the one named.
    s.budget_seconds = 300.0
    assert s.figures(_learner([360_000, 120_000], lags, train_seconds=120.0)).eta == Eta(180.0, "train_for_seconds=300")
    # No env-step budget (the default): only the time budget has an ETA.
    s.budget_steps = 1e10
    fig = s.figures(_learner([360_000, 120_000], lags, train_seconds=120.0))
    assert fig.budget_steps is None and fig.eta == Eta(180.0, "train_for_seconds=300")
