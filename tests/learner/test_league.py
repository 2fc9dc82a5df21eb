"""The league (learner/league.py) from its definition: ratings that order players by who beats
whom, head-to-head records, prioritized opponent odds, snapshots that start from their
policy's rating, and a state that survives a JSON round trip."""

import json

import pytest

from sf_hydra.core.game_results import Game
from sf_hydra.learner.league import League, priority, win_rate


def duel(a: int, b: int, ra: float, rb: float, gen_a: int = 0, gen_b: int = 0) -> Game:
    return Game((a, b), (gen_a, gen_b), (ra, rb))


def test_ratings_order_players_by_who_beats_whom():
    league = League(num_policies=2)
    for _ in range(30):  # policy 0 beats policy 1; both beat snapshot 7 (policy id 2 = pool slot 0)
        league.add(duel(0, 1, 5.0, 1.0))
        league.add(duel(1, 2, 3.0, 0.0, gen_b=7))
        league.add(duel(0, 2, 3.0, 0.0, gen_b=7))
    mu = {p["player"]: p["mu"] for p in league.table()["players"]}
    assert mu["policy_0"] > mu["policy_1"] > mu["snapshot_000007"]
    assert [p["player"] for p in league.table()["players"]] == ["policy_0", "policy_1", "snapshot_000007"]
    h2h = league.table()["head_to_head"]
    assert h2h["policy_0"]["policy_1"] == {"wins": 30, "draws": 0, "losses": 0}
    assert h2h["policy_1"]["policy_0"] == {"wins": 0, "draws": 0, "losses": 30}
    assert league.rated == 90 and league.games["policy_0"] == 60


def test_a_draw_moves_two_equal_players_nowhere():
    league = League(num_policies=2)
    league.add(duel(0, 1, 2.0, 2.0))
    a, b = league.ratings["policy_0"], league.ratings["policy_1"]
    assert a.mu == pytest.approx(b.mu) == pytest.approx(25.0)
    assert league.table()["head_to_head"]["policy_0"]["policy_1"]["draws"] == 1


def test_a_player_in_several_seats_is_ranked_by_its_best_seat():
    league = League(num_policies=1)
    # Policy 0 holds seats 0 and 2 (returns 1 and 9), snapshot 3 holds seat 1 (return 5): policy 0 won.
    league.add(Game((0, 1, 0), (0, 3, 0), (1.0, 5.0, 9.0)))
    assert league.table()["head_to_head"]["policy_0"]["snapshot_000003"]["wins"] == 1
    assert league.games["policy_0"] == 1
    # One player in every seat is no game between players.
    league.add(Game((0, 0), (0, 0), (1.0, 2.0)))
    assert league.rated == 1


def test_win_rate_and_priorities_follow_their_definitions():
    assert win_rate([]) == 0.5
    assert win_rate([1.0, 1.0, 0.5, 0.0]) == pytest.approx(3.5 / 6)
    assert priority(0.25, "hard", 2.0) == pytest.approx(0.75 ** 2)
    assert priority(0.25, "variance", 2.0) == pytest.approx(0.25 * 0.75)
    assert priority(0.25, "uniform", 2.0) == 1.0
    with pytest.raises(ValueError, match="uniform"):
        priority(0.5, "nearest", 1.0)


def test_odds_favour_the_snapshots_a_policy_does_not_beat_yet():
    league = League(num_policies=1, window=10)
    league.join(1, policy=0)
    league.join(2, policy=0)
    for _ in range(20):
        league.add(duel(0, 1, 5.0, 0.0, gen_b=1))  # snapshot 1: always beaten
        league.add(duel(0, 1, 0.0, 5.0, gen_b=2))  # snapshot 2: never beaten
    assert league.win_rate(0, 1) == pytest.approx(11 / 12)  # the last 10 games, with the prior
    assert league.win_rate(0, 2) == pytest.approx(1 / 12)
    easy, hard = league.odds(1, "hard", 2.0)[0], league.odds(2, "hard", 2.0)[0]
    assert hard / easy == pytest.approx((11 / 12) ** 2 / (1 / 12) ** 2)
    assert league.odds(1, "variance", 2.0) == pytest.approx(league.odds(2, "variance", 2.0))  # p(1-p): symmetric
    assert league.odds(3, "hard", 2.0) == [0.25]  # an unseen snapshot: p = 1/2


def test_a_snapshot_starts_from_its_policys_rating_and_retires_when_replaced():
    league = League(num_policies=2)
    for _ in range(10):
        league.add(duel(0, 1, 5.0, 1.0))
    league.join(4, policy=0)
    assert (league.ratings["snapshot_000004"].mu, league.ratings["snapshot_000004"].sigma) == (
        league.ratings["policy_0"].mu, league.ratings["policy_0"].sigma)
    league.add(duel(1, 2, 5.0, 0.0, gen_b=4))
    league.leave(4)
    assert "snapshot_000004" not in league.ratings and league.retired["snapshot_000004"]["games"] == 1
    rated = league.rated
    league.add(duel(1, 2, 5.0, 0.0, gen_b=4))  # reported after it left: not rated again
    assert league.rated == rated


def test_state_survives_a_json_round_trip():
    league = League(num_policies=1)
    league.join(1, policy=0)
    for r in (1.0, 0.0, 2.0):
        league.add(duel(0, 1, r, 1.0, gen_b=1))
    copy = League(num_policies=1)
    copy.load_state_dict(json.loads(json.dumps(league.state_dict())))
    assert copy.table() == league.table() and copy.win_rate(0, 1) == league.win_rate(0, 1)
    copy.add(duel(0, 1, 3.0, 1.0, gen_b=1))
    league.add(duel(0, 1, 3.0, 1.0, gen_b=1))
    assert copy.table() == league.table()
