"""Population-based training in real CartPole runs: policies started with a useless
learning rate are replaced (their weights equal the donor's right after, their new
hyperparameters within the perturbation bounds), the history files and TensorBoard say so,
a resumed run goes on with its population, and bad input is refused before anything starts."""

import json
import subprocess
import sys

import pytest
import torch

from sf_hydra.app.train import check_config, train
from sf_hydra.config import ConfigError
from sf_hydra.learner.pbt_rules import BELOW_ONE
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import REPO_ROOT, make_cfg

USELESS = "+pbt.initial_hyperparams={2:{learning_rate:1e-7},3:{learning_rate:1e-7}}"
PBT = ("algo.num_policies=4", "pbt.with_pbt=true", "pbt.period_env_steps=3000", "pbt.start_mutation=3000",
       "pbt.replace_fraction=0.5", "pbt.replace_reward_gap=0.1", "pbt.replace_reward_gap_absolute=5",
       "hardware.num_envs_per_worker=8", "algo.learning_rate=0.001", USELESS)


def events(run_dir):
    return [json.loads(line) for line in (run_dir / "pbt" / "events.jsonl").read_text().splitlines()]


def history(run_dir, k):
    return [json.loads(line) for line in (run_dir / "pbt" / f"hyperparams_{k}.jsonl").read_text().splitlines()]


def within_bounds(base: dict, after: dict, low: float, high: float) -> bool:
    """Each hyperparameter is unchanged, or multiplied/divided by a factor in [low, high]
    (for Adam's betas and gamma: their distance to 1)."""
    for name, old in base.items():
        new = after[name]
        if new == old:
            continue
        ratio = (1 - new) / (1 - old) if name in BELOW_ONE else new / old
        if not (low - 1e-9 <= ratio <= high + 1e-9 or low - 1e-9 <= 1 / ratio <= high + 1e-9):
            return False
    return True


def check_replacements(run_dir, low=1.1, high=1.5):
    """The useless policies were replaced; every replacement took the donor's weights bitwise
    and perturbed the donor's hyperparameters within the bounds."""
    replaced = [e for e in events(run_dir) if e["action"] == "replaced"]
    assert {2, 3} <= {e["policy"] for e in replaced}, events(run_dir)
    for e in replaced:
        assert e["weights_digest"] == e["donor_weights_digest"], e
        assert e["donor"] != e["policy"] and e["donor_objective"] - e["objective"] > 5, e
        assert within_bounds(e["hyperparams_perturbed_from"], e["hyperparams_after"], low, high), e
    for k in (2, 3):  # the history: 1e-7 at the start, a working rate after the first replacement
        lines = history(run_dir, k)
        assert lines[0]["why"] == "start" and lines[0]["learning_rate"] == pytest.approx(1e-7)
        first = next(line for line in lines if line["why"] == "replaced")
        assert first["learning_rate"] > 1e-4
    return replaced


@pytest.mark.slow
def test_useless_learning_rates_are_replaced_by_donors(tmp_path):
    cfg = make_cfg(tmp_path, *PBT, "train_for_env_steps=15000", "logger.experiment_summaries_interval=0.5")
    summary = train(cfg)
    run_dir = tmp_path / "test"
    replaced = check_replacements(run_dir)
    # The learner's hyperparameters at the end are the last line of each history, and the checkpoint holds them.
    saved = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["sf_hydra"]["hyperparams"]
    for k in range(4):
        last = history(run_dir, k)[-1]
        assert {n: last[n] for n in saved[k]} == saved[k]
    # TensorBoard: each policy's current learning rate; a replaced policy's rose from 1e-7.
    lr = [s.value for s in read_scalars(run_dir)["policy_2/pbt/learning_rate"]]
    assert lr[0] == pytest.approx(1e-7) and max(lr) > 1e-4
    assert summary["env_steps"] >= 4 * 15000 and len(replaced) >= 2
    # Every member trained on its own env steps (the long test below adds the population solving CartPole).
    assert len(summary["policies"]) == 4 and all(p["env_steps"] >= 15000 and p["policy_version"] > 0
                                                 and p["episodes"] > 0 for p in summary["policies"]), summary
    # The report draws the population and lists every replacement.
    out = subprocess.run([sys.executable, "-m", "sf_hydra.report.population", str(run_dir), "--out",
                          str(tmp_path / "population.png")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"{len(replaced)} replacements" in out.stdout
    for e in replaced:
        assert f"policy {e['policy']} took policy {e['donor']}'s weights at {e['env_steps']} " in out.stdout
    assert (tmp_path / "population.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.long  # CI runs the same 4-policy population for 15000 steps above (its replacements)
def test_the_population_solves_cartpole_after_replacing_its_useless_members(tmp_path):
    cfg = make_cfg(tmp_path, *PBT, "train_for_env_steps=600000", "train_until_avg_return=450",
                   "hardware.num_workers=2")
    summary = train(cfg)
    check_replacements(tmp_path / "test")
    assert summary["stop_reason"] == "train_until_avg_return=450 reached", summary
    assert all(p["avg_return"] >= 450 for p in summary["policies"]), summary["policies"]


@pytest.mark.slow
def test_a_resumed_run_goes_on_with_its_population_and_histories(tmp_path):
    """With batched sampling (each worker serves one policy): a replaced policy's new weights
    reach the workers that serve it, and a resume goes on with the population."""
    common = ("algo.num_policies=2", "pbt.with_pbt=true", "pbt.period_env_steps=2000", "pbt.start_mutation=2000",
              "pbt.mutation_rate=1.0", "hardware.num_envs_per_worker=8", "hardware.batched_sampling=true",
              "algo.learning_rate=0.001", "+pbt.initial_hyperparams={1:{learning_rate:1e-7}}")
    train(make_cfg(tmp_path, *common, "train_for_env_steps=8000"))
    run_dir = tmp_path / "test"
    first = events(run_dir)
    taken = [e for e in first if e["action"] == "replaced"]
    assert taken and all(e["weights_digest"] == e["donor_weights_digest"] for e in taken), first
    ended = {k: history(run_dir, k)[-1] for k in range(2)}
    train(make_cfg(tmp_path, *common, "train_for_env_steps=16000"))
    after = events(run_dir)
    assert after[: len(first)] == first and len(after) > len(first)  # appended, not restarted
    for k in range(2):
        mine = [e for e in after if e["policy"] == k]
        steps = [e["env_steps"] for e in mine]
        assert steps == sorted(steps) and len({s // 2000 for s in steps}) == len(steps)  # one look per period
        resumed = mine[len([e for e in first if e["policy"] == k]):]
        assert resumed, f"policy {k}: no look after the resume"  # 8000 more env steps: a look per 2000 of its own
        # Its first look after the resume starts from where the first session left it.
        assert resumed[0]["hyperparams_before"] == {n: ended[k][n] for n in resumed[0]["hyperparams_before"]}
        assert history(run_dir, k)[0]["why"] == "start" and sum(h["why"] == "start" for h in history(run_dir, k)) == 1


@pytest.mark.slow
def test_a_statistic_the_env_reports_is_the_target_objective(tmp_path):
    """The custom-env example reports `caught` at each episode's end: the population is ranked by it."""
    result = subprocess.run(
        [sys.executable, "train.py", "--config-dir", str(REPO_ROOT / "examples" / "custom_env" / "conf"),
         "env=custom/catch", f"train_dir={tmp_path}", "hardware.num_workers=1", "hardware.num_envs_per_worker=4",
         "algo.num_policies=2", "pbt.with_pbt=true", "pbt.target_objective=caught", "pbt.period_env_steps=500",
         "pbt.start_mutation=500", "train_for_env_steps=2500", "logger.experiment_summaries_interval=0.2",
         "train_until_avg_return=null"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = tmp_path / "catch"
    looks = events(run_dir)
    assert looks and all(e["target_objective"] == "caught" for e in looks)
    # a catch rate, not a return; None: a member that had no objective yet at that look (left out of the ranking,
    # which happens when the machine is slow and a policy has not finished an episode of its own by then)
    values = [v for e in looks for v in e["objectives"].values()]
    assert any(v is not None for v in values), looks
    assert all(v is None or 0.0 <= v <= 1.0 for v in values), values
    caught = read_scalars(run_dir)["policy_0/episode/caught"]
    assert caught and all(0.0 <= s.value <= 1.0 for s in caught)


TAGGED = "model._target_=tests.helpers.recording_models.TaggedActorCritic"


def new_rows(batch, version):
    """[B, T] True where policy 1 acted under a version above `version`."""
    return (batch["policy_ids"] == 1) & (batch["policy_versions"] > version)


@pytest.mark.parametrize("mode", ["in_worker", "server"])
def test_a_replaced_policy_acts_with_the_donors_weights_from_the_next_rollout(tmp_path, mode):
    """Real rollout workers (and inference servers): between two learner steps PBT replaces
    policy 1 by policy 0 (learner/pbt.py, the learner's copy_policy). The model records the tag
    of the weights that acted (policy k's tag is k, and travels with its weights). With no learner
    step of policy 1 after the replacement, its rows act with the donor's weights from their next
    rollout on, under a version above the one it had; and each version of a policy names one set
    of weights (what policy lag and V-trace presume)."""
    from types import SimpleNamespace

    from sf_hydra.learner.pbt import PopulationBasedTraining
    from sf_hydra.learner.ppo_learner import PPOLearner
    from sf_hydra.sampler.datamodule import SamplerDataModule
    from sf_hydra.sampler.env_info import describe_env
    from tests.helpers.plans import plan_for, sampler_for

    server = ("hardware.inference=server",) if mode == "server" else ()
    cfg = make_cfg(tmp_path, TAGGED, "algo.num_policies=2", "pbt.with_pbt=true", "pbt.mutation_rate=0.0",
                   "algo.max_policy_lag=1000", *server)
    info = describe_env(cfg.env, seed=cfg.seed)
    plan = plan_for(cfg, info.observation_space, info.action_space, info.num_agents)
    learner = PPOLearner(plan.initial_policies, plan.learner, plan.spec)
    learner.configure_optimizers()  # no Trainer: the optimizers PBT changes
    learner.statistics.objective = lambda k, name: {0: 100.0, 1: 1.0}[k]  # policy 1 far behind: replaced by policy 0
    for k, model in enumerate(learner.policies):
        model.tag.fill_(k)
    data = SamplerDataModule(sampler_for(cfg, plan), plan.batches)
    data.setup("fit")
    published = {}  # (policy, version) -> the tags of the weights published under it
    door_publish = data.door.publish

    def recording_publish(k, model, version):
        published.setdefault((k, version), set()).add(float(model.tag))
        door_publish(k, model, version)

    data.door.publish = recording_publish
    trainer = SimpleNamespace(datamodule=data)
    pbt = PopulationBasedTraining(cfg.pbt, tmp_path / "run", cfg.seed)
    bumps, batches, old_version = {0: 1, 1: 1}, [], None
    try:
        pbt.on_train_start(trainer, learner)
        for k in range(2):
            recording_publish(k, learner.policies[k], learner.policy_versions[k])
        stream = iter(data.train_dataloader())
        for i in range(60):
            batch = next(stream)
            k = batch["meta"]["policy"]
            batches.append((old_version is not None, batch))
            learner.stats[k].version += bumps[k]  # a learner step of policy k, published as PublishPolicy does
            recording_publish(k, learner.policies[k], learner.policy_versions[k])
            if old_version is None and i >= 3:
                old_version = learner.policy_versions[1]
                pbt._look_at(trainer, learner, 1, 1000)
                bumps[1] = 0  # no learner step of policy 1 from here: only PBT's publication can bring the new weights
                assert float(learner.policies[1].tag) == 0.0  # the learner holds the donor's weights
            if old_version is not None and sum(int(new_rows(b, old_version).sum()) for _, b in batches) > 200:
                break
    finally:
        data.teardown("fit")
    new = torch.cat([b["acting_tag"][new_rows(b, old_version)] for after, b in batches if after])
    assert new.numel() > 0, "policy 1's rows never acted under a version above the replaced one"
    assert bool((new == 0).all()), "after the replacement, policy 1's rows act with the donor's weights"
    for _, b in batches:  # each version names one set of weights, the one its transitions were acted by
        for k, u, tag in zip(b["policy_ids"].flatten().tolist(), b["policy_versions"].flatten().tolist(),
                             b["acting_tag"].flatten().tolist()):
            assert published[(int(k), int(u))] == {tag}, (k, u, tag, published)


def batches_around_a_replacement(cfg, run_dir, stop):
    """Real rollout workers under `cfg` (2 policies, TAGGED: policy k's weights carry tag k): each batch is
    followed by a learner step of its policy (its version up by one, published as PublishPolicy does); after
    the fourth batch of policy 0, PBT (learner/pbt.py) replaces policy 1 by policy 0 through the real door.
    Returns [(after the replacement, batch)] and the version policy 1 took then, once `stop(pairs)` holds
    (at most 80 batches)."""
    from types import SimpleNamespace

    from sf_hydra.learner.pbt import PopulationBasedTraining
    from sf_hydra.learner.ppo_learner import PPOLearner
    from sf_hydra.sampler.datamodule import SamplerDataModule
    from sf_hydra.sampler.env_info import describe_env
    from tests.helpers.plans import plan_for, sampler_for

    info = describe_env(cfg.env, seed=cfg.seed)
    plan = plan_for(cfg, info.observation_space, info.action_space, info.num_agents)
    learner = PPOLearner(plan.initial_policies, plan.learner, plan.spec)
    learner.configure_optimizers()  # no Trainer: the optimizers PBT changes
    learner.statistics.objective = lambda k, name: {0: 100.0, 1: 1.0}[k]  # policy 1 far behind: replaced by policy 0
    for k, model in enumerate(learner.policies):
        model.tag.fill_(k)
    data = SamplerDataModule(sampler_for(cfg, plan), plan.batches)
    data.setup("fit")
    trainer = SimpleNamespace(datamodule=data)
    pbt = PopulationBasedTraining(cfg.pbt, run_dir, cfg.seed)
    pairs, first_new, seen = [], None, 0
    try:
        pbt.on_train_start(trainer, learner)
        for k in range(2):
            data.door.publish(k, learner.policies[k], learner.policy_versions[k])
        stream = iter(data.train_dataloader())
        while len(pairs) < 80 and not (first_new is not None and stop(pairs)):
            batch = next(stream)
            k = batch["meta"]["policy"]
            pairs.append((first_new is not None, batch))
            learner.stats[k].version += 1
            data.door.publish(k, learner.policies[k], learner.policy_versions[k])
            seen += k == 0
            if first_new is None and k == 0 and seen == 4:
                pbt._look_at(trainer, learner, 1, 1000)
                first_new = learner.policy_versions[1]
                assert float(learner.policies[1].tag) == 0.0  # the learner holds the donor's weights
    finally:
        data.teardown("fit")
    return pairs, first_new


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_what_the_replaced_weights_acted_never_trains_the_donors_copy(tmp_path, mode):
    """A replacement raises policy 1's version by one, so what its old weights acted lags by a few versions
    only, far below algo.max_policy_lag; trained on, it would teach the donor's copy with the old network's
    log-probs and values. After the replacement every batch of policy 1 holds only transitions the donor's
    weights acted (tag 0, a version from the replacement's on): the rest (waiting, or in flight on the
    workers when the new weights arrived) is dropped and counted."""
    sync = ("algo=ppo",) if mode == "sync" else ()
    cfg = make_cfg(tmp_path, TAGGED, "algo.num_policies=2", "pbt.with_pbt=true", "pbt.mutation_rate=0.0",
                   "algo.max_policy_lag=1000", *sync)

    def two_batches_of_policy_1(pairs):
        return sum(after and b["meta"]["policy"] == 1 for after, b in pairs) >= 2

    pairs, first_new = batches_around_a_replacement(cfg, tmp_path / "run", two_batches_of_policy_1)
    after = [b for was_after, b in pairs if was_after and b["meta"]["policy"] == 1]
    assert len(after) >= 2, "no batch of policy 1 after the replacement"
    for b in after:
        mine = b["policy_ids"] == 1
        assert bool((b["acting_tag"][mine] == 0).all()), "policy 1 trains on what its replaced weights acted"
        assert int(b["policy_versions"][mine].min()) >= first_new
    dropped = sum(b["meta"]["dropped_trajectories"] for was_after, b in pairs if was_after)
    assert dropped > 0, "nothing of the replaced weights was dropped"


@pytest.mark.parametrize("overrides, key", [
    (("pbt.with_pbt=true",), "pbt.with_pbt"),  # one policy
    (("algo.num_policies=4", "pbt.with_pbt=true", "pbt.replace_fraction=0.9"), "pbt.replace_fraction"),
    (("algo.num_policies=4", "pbt.with_pbt=true", "pbt.perturb_min=1.6", "pbt.perturb_max=1.2"), "pbt.perturb_max"),
    (("algo.num_policies=4", "pbt.with_pbt=true", "pbt.target_objective=frags"), "pbt.target_objective"),
    (("algo.num_policies=2", "pbt.with_pbt=true", "+pbt.initial_hyperparams={1:{lr:0.1}}"),
     "pbt.initial_hyperparams.1"),
    (("algo.num_policies=2", "pbt.with_pbt=true", "+pbt.initial_hyperparams={5:{learning_rate:0.1}}"),
     "pbt.initial_hyperparams"),
    (("pbt.with_pbt=true", "pbt.workspace=/tmp/ws"), "pbt.member"),
    (("algo.num_policies=2", "pbt.with_pbt=true", "pbt.workspace=/tmp/ws", "pbt.member=0"), "algo.num_policies"),
])
def test_bad_pbt_input_names_the_key(tmp_path, overrides, key):
    with pytest.raises(ConfigError) as info:
        check_config(make_cfg(tmp_path, *overrides))
    assert info.value.key == key, str(info.value)


def test_bad_pbt_input_stops_the_command_before_any_process_starts(tmp_path):
    result = subprocess.run(
        [sys.executable, "train.py", f"train_dir={tmp_path}", "algo.num_policies=4", "pbt.with_pbt=true",
         "pbt.target_objective=frags"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "pbt.target_objective" in result.stderr and "'frags'" in result.stderr and "true_objective" in result.stderr
    assert not any(tmp_path.rglob("*.ckpt"))


@pytest.mark.slow
@pytest.mark.parametrize("batched", [False, True], ids=["env_per_row", "vector_env"])
def test_each_policy_is_paid_by_its_own_reward_shaping_weights(tmp_path, batched):
    """An env family that declares reward shaping (tests/helpers/shaped_envs.py: CartPole's +1
    per step is the shaped quantity ALIVE, weight 1) pays a policy with its own weights: policy
    1 starts at ALIVE up = 3, so each of its steps earns 3 (the rollout worker adds the
    difference), policy 0's earn 1."""
    cfg = make_cfg(tmp_path, "env.factory._target_=tests.helpers.shaped_envs.ShapedCartPoleFamily",
                   "algo.num_policies=2", "pbt.with_pbt=true", "pbt.start_mutation=1000000000",
                   "+pbt.initial_hyperparams={1:{reward_shaping.ALIVE.up:3.0}}", "train_for_env_steps=3000",
                   f"hardware.batched_sampling={str(batched).lower()}")
    summary = train(cfg)
    zero, one = summary["policies"]
    assert zero["avg_return"] == pytest.approx(zero["avg_length"])
    assert one["avg_return"] == pytest.approx(3 * one["avg_length"])
    # The true return (what PBT ranks by) is the game's at the env's own weights: CartPole's length for both.
    assert zero["true_return"] == pytest.approx(zero["avg_length"])
    assert one["true_return"] == pytest.approx(one["avg_length"])
    scalars = read_scalars(tmp_path / "test")
    assert "policy_1/episode/true_return" in scalars and "policy_1/episode/return" in scalars
    assert one["hyperparams"]["reward_shaping.ALIVE.up"] == 3.0
    assert zero["hyperparams"]["reward_shaping.ALIVE.up"] == 1.0


def test_a_shaping_name_the_env_does_not_declare_is_refused(tmp_path):
    with pytest.raises(ConfigError) as info:
        check_config(make_cfg(tmp_path, "env.factory._target_=tests.helpers.shaped_envs.ShapedCartPoleFamily",
                              "algo.num_policies=2", "pbt.with_pbt=true",
                              "+pbt.initial_hyperparams={1:{reward_shaping.HEALTH.up:3.0}}"))
    assert info.value.key == "pbt.initial_hyperparams.1" and "reward_shaping.ALIVE.up" in str(info.value)
