"""Several policies through the real sampler: every transition a policy's learner trains on
was acted by that policy's weights, in async, sync and serial mode, with single-agent and
multi-agent envs; lag per policy; snapshots of the opponent pool act but are never recorded.

The model (`tests.helpers.recording_models.TaggedActorCritic`) records with every step the
`tag` buffer of the weights that acted; policy k's tag is set to k before the workers start,
so a transition's tag says whose weights acted, whatever its `policy_ids` entry claims."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from sf_hydra.core.game_results import pool_outcome
from tests.helpers.plans import plan_for, sampler_for

TAGGED = "model._target_=tests.helpers.recording_models.TaggedActorCritic"
TOY_2 = ("env=gym/multi_agent_toy", "env.kwargs.num_agents=2")
PER_EPISODE = "algo.policy_assignment=per_episode"  # single-agent envs: each episode draws its policy


def _stream(cfg, batches: int, bumps=None, before_start=None):
    """Trains nothing: takes `batches` batches from the real datamodule, bumping the version
    of the batch's policy by `bumps[k]` (default 1) and publishing it after each, as the
    learner does. Returns the learner (with its policies' tags set) and the batches."""
    from sf_hydra.learner.ppo_learner import PPOLearner
    from sf_hydra.sampler.datamodule import SamplerDataModule
    from sf_hydra.sampler.env_info import describe_env

    info = describe_env(cfg.env, seed=cfg.seed)
    plan = plan_for(cfg, info.observation_space, info.action_space, info.num_agents)
    learner = PPOLearner(plan.initial_policies, plan.learner, plan.spec)
    for k, model in enumerate(learner.policies):
        model.tag.fill_(k)
    data = SamplerDataModule(sampler_for(cfg, plan), plan.batches)
    data.setup("fit")
    got = []

    def publish(k):  # through the door, as learner/callbacks.py PublishPolicy does
        data.door.publish(k, learner.policies[k], learner.policy_versions[k])

    try:
        if before_start is not None:
            before_start(data.sampler, learner)
        for k in range(len(learner.policies)):
            publish(k)
        stream = iter(data.train_dataloader())
        for _ in range(batches):
            batch = next(stream)
            k = batch["meta"]["policy"]
            got.append(batch)
            learner.stats[k].version += (bumps or {}).get(k, 1)
            publish(k)
    finally:
        data.teardown("fit")
    return learner, got


@pytest.mark.parametrize("mode", ["async", "sync", "serial", "server"])
@pytest.mark.parametrize("env", ["cartpole", "toy"])
def test_each_learner_trains_only_on_what_its_policy_acted(tmp_cfg, mode, env):
    overrides = {"async": [], "sync": ["algo=ppo"], "serial": ["hardware.serial_mode=true"],
                 "server": ["hardware.inference=server", "hardware.worker_num_splits=2"]}[mode]
    env_overrides = TOY_2 if env == "toy" else (PER_EPISODE,)  # policies change within the trajectories
    cfg = tmp_cfg(*env_overrides, TAGGED, "algo.num_policies=2", *overrides)
    _, batches = _stream(cfg, 12)
    seen = set()
    for batch in batches:
        k = batch["meta"]["policy"]
        seen.add(k)
        ids, tags = batch["policy_ids"], batch["acting_tag"]
        assert torch.equal(tags, ids.float()), "a transition's recorded policy is the one whose weights acted"
        assert (ids == k).any(), f"a batch of policy {k} without any of its transitions"
    assert seen == {0, 1}
    # Policies change only at episode ends: every change inside a trajectory follows a done.
    for batch in batches:
        changed = batch["policy_ids"][:, 1:] != batch["policy_ids"][:, :-1]
        assert bool((batch["dones"][:, :-1][changed] == 1).all())


def test_policy_lag_and_versions_are_per_policy(tmp_cfg):
    """Policy 0's version moves by 10 per batch, policy 1's by 1: each transition carries its
    own policy's version, never the other's."""
    cfg = tmp_cfg(*TOY_2, TAGGED, "algo.num_policies=2")
    learner, batches = _stream(cfg, 16, bumps={0: 10, 1: 1})
    top = {0: 0, 1: 0}
    for batch in batches:
        ids, versions = batch["policy_ids"], batch["policy_versions"]
        assert bool((versions[ids == 0] % 10 == 0).all())
        assert bool((versions[ids == 1] <= top[1]).all())
        top[batch["meta"]["policy"]] = learner.stats[batch["meta"]["policy"]].version  # after this batch's bump
    assert learner.stats[0].version >= 10 and learner.stats[1].version >= 1


@pytest.mark.parametrize("mix", [True, False])
def test_mixing_policies_in_one_env(tmp_cfg, mix):
    """Agents that end their episodes together (equal lengths, never inactive): with mixing,
    the agents of an env often act for different policies; without, they never do."""
    from tests.sampler.collect import running_sampler

    cfg = tmp_cfg("env=gym/multi_agent_toy", "+env.kwargs.length_step=0", "+env.kwargs.inactive_period=1000",
                  "algo.num_policies=3", f"pbt.mix_policies_in_one_env={str(mix).lower()}",
                  "hardware.serial_mode=true", "hardware.num_workers=1")
    mixed, seatings, policies_seen = 0, 0, set()
    with running_sampler(cfg) as sampler:
        worker = sampler.serial_workers[0]
        for _ in range(20):
            traj = sampler.poll()
            sampler.free(traj.slots)
            per_env = worker.mapping.policy.reshape(cfg.hardware.num_envs_per_worker, 3)
            mixed += int(sum(len(set(row)) > 1 for row in per_env.tolist()))
            seatings += per_env.shape[0]
            policies_seen.update(per_env.ravel().tolist())
    assert policies_seen == {0, 1, 2}
    if mix:  # 1 - P(3 agents draw the same of 3 policies) = 8/9
        assert mixed / seatings > 0.6
    else:
        assert mixed == 0


def test_snapshots_act_in_opponent_seats_and_are_never_recorded(tmp_cfg):
    """A snapshot (tag 99) published into the pool acts in opponent seats (latest_prob=0: every
    opponent seat is a snapshot's): its games are reported as a snapshot's, the trained seat
    gets win/draw/loss outcomes, and none of its transitions reaches a learner."""
    cfg = tmp_cfg(*TOY_2, TAGGED, "algo.num_policies=2", "selfplay.pool_size=2", "selfplay.latest_prob=0.0")

    def add_snapshot(sampler, learner):
        import copy

        frozen = copy.deepcopy(learner.policies[0])
        frozen.tag.fill_(99)
        sampler.publish_opponent(0, frozen, 1)

    _, batches = _stream(cfg, 10, before_start=add_snapshot)
    tags = torch.cat([b["acting_tag"].reshape(-1) for b in batches])
    assert set(tags.unique().tolist()) <= {0.0, 1.0}
    episodes = [e for b in batches for e in b["meta"]["episodes"]]
    assert any(e.policy == 2 for e in episodes), "the snapshot (policy id 2 = pool slot 0) played"
    assert all(e.policy in (0, 1, 2) for e in episodes)
    games = [g for b in batches for g in b["meta"]["games"]]
    outcomes = [o for o in (pool_outcome(g, 2) for g in games) if o is not None]
    assert outcomes and {r for _, r in outcomes} <= {"win", "draw", "loss"}
    assert {p for p, _ in outcomes} <= {0, 1}
    assert {g for game in games for p, g in zip(game.policies, game.generations) if p >= 2} == {1}, \
        "a snapshot seat is named by its generation"


@pytest.mark.parametrize("mode", ["async", "server"])
def test_opponent_odds_reach_the_workers(tmp_cfg, mode):
    """Odds set through the door before the workers start: slot 0 at 0 for every policy, slot 1 at 1.
    Only slot 1's snapshot (policy id 3) takes opponent seats; even odds would seat both."""
    extra = ["hardware.inference=server"] if mode == "server" else []
    cfg = tmp_cfg(*TOY_2, TAGGED, "algo.num_policies=2", "selfplay.pool_size=2", "selfplay.latest_prob=0.0",
                  *extra)

    def two_snapshots(sampler, learner):
        import copy

        from sf_hydra.sampler.sampler_door import Door

        for slot in (0, 1):
            frozen = copy.deepcopy(learner.policies[0])
            frozen.tag.fill_(90 + slot)
            sampler.publish_opponent(slot, frozen, slot + 1)
        door = Door(sampler)
        door.set_opponent_odds(0, [0.0, 0.0])
        door.set_opponent_odds(1, [1.0, 1.0])

    _, batches = _stream(cfg, 10, before_start=two_snapshots)
    snapshot_episodes = {e.policy for b in batches for e in b["meta"]["episodes"] if e.policy >= 2}
    assert snapshot_episodes == {3}, snapshot_episodes


class FixedPool:
    """A PoolView over fixed filled slots (generation: slot + 1) and per-policy odds."""

    def __init__(self, filled, odds=None):
        self._filled, self._odds = list(filled), odds

    def filled(self):
        return self._filled

    def generation(self, slot):
        return slot + 1

    def odds(self, policy):
        return np.zeros(0) if self._odds is None else np.asarray(self._odds[policy], dtype=float)


def test_policy_mapping_statistics():
    """The assignment rules of sampler/policy_mapping.py, counted over many episodes."""
    from sf_hydra.sampler.policy_mapping import PolicyMapping

    def seatings(mapping, episodes):
        out = []
        for _ in range(episodes):
            for row in range(len(mapping.policy)):
                mapping.episode_end(row, 0.0, [])
            out.append(mapping.policy.copy())
        return np.array(out)

    rng = np.random.default_rng(0)
    # Single-agent envs: each env's policy drawn uniformly per episode.
    single = PolicyMapping([1] * 4, 4, rng=rng)
    single.start()
    counts = np.bincount(seatings(single, 2000).ravel(), minlength=4) / 8000
    assert np.allclose(counts, 0.25, atol=0.03)
    # No mixing: one policy per env episode.
    together = PolicyMapping([3, 3], 3, mix=False, rng=rng)
    together.start()
    s = seatings(together, 500).reshape(500, 2, 3)
    assert (s == s[:, :, :1]).all() and len(np.unique(s)) == 3
    # A pool: one trained seat per env; others a snapshot (ids 2..4) with probability 1 - latest_prob,
    # drawn uniformly among the filled slots (0 and 2 of 3).
    pool = PolicyMapping([4], 2, pool_size=3, latest_prob=0.25, rng=rng)
    pool.start(FixedPool([0, 2]))
    s = seatings(pool, 3000).reshape(3000, 4)
    trained_seats = (s < 2).sum(1)
    assert trained_seats.min() >= 1
    snapshot_share = (s >= 2).sum() / (3000 * 3)  # of the 3 opponent seats
    assert abs(snapshot_share - 0.75) < 0.03
    assert set(np.unique(s[s >= 2])) == {2, 4}
    # Games: whole, each seat's player and return; the outcome is the trained seat's return against
    # the best snapshot's.
    duel = PolicyMapping([2], 1, pool_size=1, latest_prob=0.0, rng=rng)
    duel.start(FixedPool([0]))
    games = []
    for _ in range(50):
        trained = int(np.flatnonzero(duel.policy == 0)[0])
        duel.episode_end(trained, 5.0, games)
        duel.episode_end(1 - trained, 3.0, games)
    assert len(games) == 50 and all(sorted(zip(g.policies, g.generations, g.returns)) == [(0, 0, 5.0), (1, 1, 3.0)]
                                    for g in games)
    assert [pool_outcome(g, 1) for g in games] == [(0, "win")] * 50
    # One player in every seat: not a game between players, not reported.
    alone = PolicyMapping([2], 1, rng=rng)
    alone.start()
    reported = []
    for row in (0, 1, 0, 1):
        alone.episode_end(row, 1.0, reported)
    assert reported == []


def test_opponents_are_drawn_with_the_learners_odds():
    """selfplay.opponent_sampling: each opponent seat takes a filled slot with the odds the learner
    set for the learning seat's policy (here policy 0: slot 0 at 1, slot 2 at 3; slot 1 is empty)."""
    from sf_hydra.sampler.policy_mapping import PolicyMapping

    mapping = PolicyMapping([2], 1, pool_size=3, latest_prob=0.0, rng=np.random.default_rng(1))
    mapping.start(FixedPool([0, 2], odds={0: [1.0, 5.0, 3.0]}))
    drawn = []
    for _ in range(4000):
        for row in (0, 1):
            mapping.episode_end(row, 0.0, [])
        drawn.append(int(mapping.policy.max()) - 1)  # the snapshot seat's slot
    share = np.bincount(drawn, minlength=3) / len(drawn)
    assert share[1] == 0 and abs(share[2] - 0.75) < 0.03, share
    # Odds of zero everywhere (every snapshot beaten for sure): uniform rather than nothing.
    mapping.start(FixedPool([0, 2], odds={0: [0.0, 0.0, 0.0]}))
    drawn = []
    for _ in range(2000):
        for row in (0, 1):
            mapping.episode_end(row, 0.0, [])
        drawn.append(int(mapping.policy.max()) - 1)
    assert abs(np.mean(np.array(drawn) == 2) - 0.5) < 0.05


def test_batched_sampling_maps_whole_workers_to_policies(tmp_cfg):
    from tests.sampler.collect import collect

    # Serial mode: the workers take turns, so both deliver (with processes one may deliver all 16 first).
    cfg = tmp_cfg("hardware.batched_sampling=true", "algo.num_policies=2", "hardware.worker_num_splits=1",
                  "hardware.serial_mode=true")
    got = collect(cfg, min_slots=16)
    ids = got.batch["policy_ids"]
    assert set(ids.unique().tolist()) == {0, 1}
    assert bool((ids == ids[:, :1]).all()), "a worker's rows never change policy"


@pytest.mark.parametrize("policies, per_worker", [(1, 48), (2, 96), (4, 176)])
def test_slots_per_worker_with_several_policies(compose_cfg, policies, per_worker):
    """The CartPole 2x16 preset of benchmarks/several_policies.py (32 trajectories per iteration): one policy
    keeps its 3 rounds of 16 slots; with P policies a batch takes up to 40 trajectories (until they hold 1,024
    of its own transitions: most_slots_per_batch), and a blocked worker (fewer than 16 free) has at least
    per_worker - 15 slots waiting, which must be P x 39 + 1: then some policy has 40 of them (pigeonhole), a
    whole batch, and the learner does not wait for data while that worker waits for slots."""
    from sf_hydra.plan import slots_per_worker

    cfg = compose_cfg("env=gym/cartpole", "algo.rollout=32", "algo.batch_size=512", "algo.num_batches_per_epoch=2",
                      f"algo.num_policies={policies}")
    assert cfg.algo.num_batches_per_epoch == 2
    got = slots_per_worker(cfg.algo, num_workers=2, rows_per_worker=16, agent_rows=False)
    assert got == per_worker
    if policies > 1:
        assert got - 16 + 1 >= policies * 39 + 1


def test_a_blocked_worker_leaves_some_policy_a_whole_batch(tmp_cfg):
    """The real sampler with a learner that frees nothing: each worker fills all its slots, then waits
    for free ones. From each worker's trajectories alone, some policy must have a whole iteration (a batch's
    count of its own transitions, or the most trajectories a batch takes), or the learner would wait for data
    while that worker waits for slots. Short rollouts (4 steps of ~20-step random CartPole episodes) keep
    slots of both policies rare, so the policies' shares of a worker's slots are near half each: with the
    sampler-wide slot count (40 per worker here, 32 needed by one policy) no policy had a batch."""
    from sf_hydra.sampler.settings import most_slots_per_batch
    from tests.sampler.collect import running_sampler

    cfg = tmp_cfg("env=gym/cartpole", PER_EPISODE, "algo.num_policies=2", "hardware.num_workers=2",
                  "hardware.num_envs_per_worker=8", "algo.rollout=4", "algo.batch_size=64",
                  "algo.num_batches_per_epoch=2")
    traj_per_batch = 64 * 2 // 4
    most = most_slots_per_batch(traj_per_batch, 2)
    with running_sampler(cfg) as sampler:
        per_worker = sampler.per_worker
        slots = {w: [] for w in range(2)}
        deadline = time.monotonic() + 60
        while any(len(s) < per_worker for s in slots.values()):
            assert time.monotonic() < deadline, {w: len(s) for w, s in slots.items()}
            traj = sampler.poll(0.5)
            if traj is not None:
                slots[traj.worker_id] += traj.slots
        assert sampler.poll(1.0) is None, "a worker went on without free slots"
        for w, owned in slots.items():
            ids = sampler.buffers["policy_ids"][torch.tensor(owned)]
            acted_in = [int((ids == k).any(1).sum()) for k in range(2)]
            own = [int((ids == k).sum()) for k in range(2)]
            whole = [own[k] >= traj_per_batch * 4 or acted_in[k] >= most for k in range(2)]
            assert any(whole), f"worker {w}: policies acted in {acted_in} of {len(owned)} slots, {own} transitions"


def test_an_async_batch_holds_a_full_batch_of_its_own_transitions(tmp_cfg):
    """Short rollouts of random CartPole (8 steps, episodes of ~20) make trajectories that change policy
    common. From the definition: a policy's asynchronous batch takes trajectories until they hold
    batch_size x num_batches_per_epoch of its own transitions (the fewest trajectories that do), or the most
    a batch may take; a batch of more than `traj_per_batch` trajectories says so (`full_trajectories`), so
    that the learner cuts a full batch's minibatches from it. Counting trajectories instead (every batch
    `traj_per_batch` of them) gives each policy fewer of its own transitions per learner iteration."""
    from sf_hydra.sampler.settings import most_slots_per_batch

    cfg = tmp_cfg("env=gym/cartpole", TAGGED, PER_EPISODE, "algo.num_policies=2", "algo.rollout=8",
                  "algo.batch_size=128", "algo.num_batches_per_epoch=2", "hardware.num_workers=2",
                  "hardware.num_envs_per_worker=8")
    traj_per_batch, rows = 128 * 2 // 8, 128 * 2
    most = most_slots_per_batch(traj_per_batch, 2)
    _, batches = _stream(cfg, 16)
    longer = 0
    for batch in batches:
        k, meta = batch["meta"]["policy"], batch["meta"]
        own = (batch["policy_ids"] == k).sum(1).tolist()  # per trajectory, in the order taken
        assert min(own) > 0, "a trajectory without the policy's transitions"
        assert len(own) <= most
        if len(own) < most:
            assert sum(own) >= rows and sum(own[:-1]) < rows, f"{own}: not the fewest that hold {rows}"
        assert meta["full_trajectories"] == (traj_per_batch if len(own) > traj_per_batch else None)
        longer += len(own) > traj_per_batch
    assert longer > 0, "no trajectory changed policy: the test shows nothing"


FIXED = ("env=gym/cartpole", "hardware.num_workers=2", "hardware.num_envs_per_worker=4", "hardware.worker_num_splits=2")
FIXED_4 = (*FIXED, "algo.num_policies=4")


@pytest.mark.parametrize("policies", [4, 2])
@pytest.mark.parametrize("mode", ["async", "sync", "serial", "server"])
def test_fixed_assignment_gives_each_learner_trajectories_of_its_own_policy(tmp_cfg, mode, policies):
    """algo.policy_assignment=auto resolves to fixed here (8 envs; 4 policies: blocks of 2, each a split of its
    worker; 2 policies: a worker each, which acts and records with its policy's index alone): every trajectory
    a learner gets holds its own policy's steps only, acted by its weights, so no batch needs more than a
    batch's trajectories and no slot waits for two learners. The same run with per_episode mixes policies
    inside trajectories."""
    overrides = {"async": [], "sync": ["algo=ppo"], "serial": ["hardware.serial_mode=true"],
                 "server": ["hardware.inference=server"]}[mode]
    _, batches = _stream(tmp_cfg(*FIXED, f"algo.num_policies={policies}", TAGGED, "algo.rollout=8", *overrides), 12)
    assert {b["meta"]["policy"] for b in batches} == set(range(policies))
    for batch in batches:
        k = batch["meta"]["policy"]
        assert bool((batch["policy_ids"] == k).all()), f"policy {k}'s batch holds another policy's steps"
        assert torch.equal(batch["acting_tag"], batch["policy_ids"].float())
        assert batch["meta"]["full_trajectories"] is None
    _, mixed = _stream(tmp_cfg(*FIXED, f"algo.num_policies={policies}", TAGGED, "algo.rollout=8", PER_EPISODE,
                               *overrides), 12)
    assert any(bool((b["policy_ids"] != b["meta"]["policy"]).any()) for b in mixed), "per_episode never mixed"


def test_fixed_assignment_keeps_each_env_on_its_block_policy(tmp_cfg):
    """Row by row through the real sampler: row i of worker w (its slot i of the message) holds only policy
    env_policies(...)[w * 4 + i], from the definition: the 8 envs in 4 contiguous blocks; each split (2 envs)
    is one policy's, so it acts in one forward. A worker follows only its own policies' weights: policy 3's
    new version reaches worker 1, not worker 0."""
    from sf_hydra.sampler.policy_mapping import env_policies
    from tests.sampler.collect import running_sampler

    assert env_policies(2, 4, 4) == (0, 0, 1, 1, 2, 2, 3, 3)
    cfg = tmp_cfg(*FIXED_4, "hardware.serial_mode=true")
    seen = {0: 0, 1: 0}
    with running_sampler(cfg) as sampler:
        sampler.publish(3, sampler.model, 7)
        while min(seen.values()) < 3:
            traj = sampler.poll(1.0)
            if traj is None:
                continue
            ids = sampler.buffers["policy_ids"][torch.tensor(traj.slots)]
            expected = torch.tensor(env_policies(2, 4, 4)[traj.worker_id * 4:(traj.worker_id + 1) * 4])
            assert torch.equal(ids, expected[:, None].expand_as(ids)), (traj.worker_id, ids)
            seen[traj.worker_id] += 1
            sampler.free(traj.slots)
        w0, w1 = sampler.serial_workers
        assert (w0.followed, w1.followed) == ([0, 1], [2, 3])
        assert int(w0.versions[3]) == 0 and int(w1.versions[3]) == 7


@pytest.mark.parametrize("workers, envs, policies", [(2, 16, 2), (2, 8, 4), (1, 6, 3), (3, 4, 2), (4, 8, 4)])
def test_env_policies_are_equal_contiguous_blocks(workers, envs, policies):
    """From the definition: every policy gets envs / policies envs, one run of consecutive envs each, in policy
    order; when the policies divide workers x splits, each split of a worker (np.linspace bounds, as the worker
    cuts them) acts for one policy."""
    from sf_hydra.sampler.policy_mapping import env_policies

    got = env_policies(workers, envs, policies)
    assert len(got) == workers * envs and list(got) == sorted(got)
    assert [got.count(p) for p in range(policies)] == [workers * envs // policies] * policies
    for splits in (1, 2, 4):
        if envs % splits or (workers * splits) % policies:
            continue
        bounds = np.linspace(0, envs, splits + 1).astype(int)
        for w in range(workers):
            for a, b in zip(bounds[:-1], bounds[1:]):
                assert len(set(got[w * envs + a:w * envs + b])) == 1, (w, a, b, got)


def test_auto_assignment_resolves_by_env_count_and_agents(compose_cfg):
    """auto: fixed when the envs divide evenly among several policies of a single-agent env; per_episode
    otherwise (no env_policies), and always with one policy, a multi-agent env or per_episode asked."""
    from sf_hydra.plan import fixed_env_policies

    def resolved(*overrides, agents=None):
        return fixed_env_policies(compose_cfg("env=gym/cartpole", *overrides), agents)

    assert resolved("algo.num_policies=2", "hardware.num_workers=2", "hardware.num_envs_per_worker=3") == (
        0, 0, 0, 1, 1, 1)
    assert resolved("algo.num_policies=4", "hardware.num_workers=1", "hardware.num_envs_per_worker=6") is None
    assert resolved("algo.num_policies=2", "hardware.num_workers=2", agents=2) is None
    assert resolved("algo.num_policies=1") is None
    assert resolved("algo.num_policies=2", "hardware.num_workers=2", PER_EPISODE) is None
    assert resolved("algo.num_policies=2", "hardware.num_workers=2", "hardware.batched_sampling=true") is None


def test_serial_snapshot_keeps_each_envs_policy(tmp_cfg, tmp_path, monkeypatch):
    """Serial mode's resumable worker state holds the policy mapping: after a restore every env acts for the
    policy it had at the snapshot (per_episode: its draw at its last episode start), not a fresh draw."""
    from tests.sampler.collect import running_sampler

    monkeypatch.setenv("SF_HYDRA_HOME", str(tmp_path / "home"))  # the snapshots' seal key: not the user's

    cfg = tmp_cfg("env=gym/cartpole", PER_EPISODE, "algo.num_policies=2", "hardware.serial_mode=true",
                  "hardware.num_workers=1", "hardware.num_envs_per_worker=8", "algo.rollout=16")
    with running_sampler(cfg) as sampler:
        worker = sampler.serial_workers[0]
        for _ in range(3):
            sampler.free(sampler.poll(5.0).slots)
        state, before = sampler.serial_state(), worker.mapping.policy.copy()
        changed = 0
        for _ in range(10):
            sampler.free(sampler.poll(5.0).slots)
            changed += int((worker.mapping.policy != before).any())
        assert changed, "no env changed policy: the test shows nothing"
        sampler.restore_serial_state(state)
        assert (worker.mapping.policy == before).all()
