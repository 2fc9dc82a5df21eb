"""The trajectory spec: fields declared once, buffers allocated from it, records written through
the writer or staged per rollout, and a field a model adds arriving in the learner's batch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from sf_hydra.core.trajectory import Field, RolloutStaging, TrajectoryBuffers, TrajectoryWriter, trajectory_spec
from tests.helpers.plans import plan_for, sampler_for


def _dict_space():
    return gym.spaces.Dict({
        "obs": gym.spaces.Box(0, 255, (3, 8, 6), np.uint8),
        "measurements": gym.spaces.Box(-1, 1, (4,), np.float32),
    })


def test_spec_derives_every_field_from_the_spaces_and_the_model():
    spec = trajectory_spec(_dict_space(), gym.spaces.MultiDiscrete([3, 2]), rnn_state_size=5,
                           extra_fields=[Field("logits", (5,))])
    assert spec.names() == ["obs.measurements", "obs.obs", "actions", "log_probs", "values", "policy_versions",
                            "rewards", "dones", "time_outs", "rnn_states", "logits"]
    assert (spec["obs.obs"].shape, spec["obs.obs"].dtype) == ((3, 8, 6), torch.uint8)
    assert (spec["actions"].shape, spec["actions"].dtype) == ((2,), torch.int64)
    assert spec["values"].bootstrap and not spec["rewards"].bootstrap
    assert spec["rnn_states"].chunk_start_only and spec["rnn_states"].shape == (5,)
    assert spec["policy_versions"].dtype == torch.int64
    # No RNN: no state field at all; Box actions are flat float rows.
    plain = trajectory_spec(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Box(-1, 1, (2, 3)), rnn_state_size=0)
    assert "rnn_states" not in plain and (plain["actions"].shape, plain["actions"].dtype) == ((6,), torch.float32)
    with pytest.raises(ValueError, match="'rewards' declared twice"):
        trajectory_spec(_dict_space(), gym.spaces.Discrete(3), 0, extra_fields=[Field("rewards")])


def test_buffers_are_allocated_per_field_in_shared_memory():
    spec = trajectory_spec(_dict_space(), gym.spaces.Discrete(3), rnn_state_size=5)
    buffers = TrajectoryBuffers.allocate(spec, num_slots=7, rollout=4)
    for f in spec:
        t = buffers[f.name]
        assert t.is_shared() and t.dtype == f.dtype
        assert t.shape == (7, 5 if f.name == "values" else 4, *f.shape)
    batch = buffers.gather(torch.tensor([6, 2]))
    assert set(batch) == set(spec.names()) and batch["obs.obs"].shape == (2, 4, 3, 8, 6)


def test_writer_puts_each_record_row_at_its_slot_and_step():
    spec = trajectory_spec(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(3), rnn_state_size=0)
    buffers = TrajectoryBuffers.allocate(spec, num_slots=4, rollout=3)
    writer = TrajectoryWriter(buffers)
    slots, steps = torch.tensor([3, 0, 1]), torch.tensor([2, 0, 1])
    obs = torch.arange(6, dtype=torch.float32).reshape(3, 2)
    writer.write(slots, steps, {"obs.obs": obs, "actions": torch.tensor([2, 1, 0]), "policy_versions": 9})
    writer.write(slots[:2], 3, {"values": torch.tensor([0.5, -0.5])})  # the bootstrap step
    # Only the rows picked by `select`, at the positions given for them.
    writer.write(slots[1:], steps[1:], {"rewards": torch.tensor([1.0, 2.0, 3.0])}, select=torch.tensor([0, 2]))
    for i, (s, t) in enumerate(zip(slots.tolist(), steps.tolist())):
        assert torch.equal(buffers["obs.obs"][s, t], obs[i])
        assert buffers["policy_versions"][s, t] == 9
    assert buffers["actions"][3, 2] == 2 and buffers["actions"][0, 0] == 1 and buffers["actions"][1, 1] == 0
    assert buffers["values"][3, 3] == 0.5 and buffers["values"][0, 3] == -0.5
    assert buffers["rewards"][0, 0] == 1.0 and buffers["rewards"][1, 1] == 3.0
    assert buffers["rewards"].count_nonzero() == 2 and buffers["policy_versions"].count_nonzero() == 3


def test_a_staged_rollout_lands_in_its_slots_as_direct_writes_would():
    """A single-agent worker's records, written step by step into its RolloutStaging (two splits, a
    bootstrap step, a scalar field, a dtype to convert, a bfloat16 field numpy lacks) and flushed into
    its rollout's slots, leave the buffers exactly as TrajectoryWriter's writes at (slot, step) would."""
    spec = trajectory_spec(_dict_space(), gym.spaces.Discrete(3), rnn_state_size=0,
                           extra_fields=[Field("half", (2,), torch.bfloat16)])
    direct, staged = (TrajectoryBuffers.allocate(spec, num_slots=6, rollout=3) for _ in range(2))
    writer, staging = TrajectoryWriter(direct), RolloutStaging(staged, rows=4)
    slots = torch.tensor([5, 0, 3, 2])  # row i's slot
    gen = torch.Generator().manual_seed(0)
    for t in range(3):
        for split in (slice(0, 1), slice(1, 4)):
            n = split.stop - split.start
            record = {"obs.obs": torch.randint(0, 255, (n, 3, 8, 6), generator=gen).to(torch.uint8),
                      "obs.measurements": torch.randn(n, 4, generator=gen), "actions": torch.tensor([t % 3] * n),
                      "log_probs": torch.randn(n, generator=gen, dtype=torch.float64),  # converted to float32
                      "policy_versions": 7 + t, "dones": torch.rand(n, generator=gen) > 0.5,
                      "half": torch.randn(n, 2, generator=gen)}
            writer.write(slots[split], t, record)
            staging.write(split, t, record)
    for split in (slice(0, 1), slice(1, 4)):
        bootstrap = {"values": torch.randn(split.stop - split.start, generator=gen)}
        writer.write(slots[split], 3, bootstrap)
        staging.write(split, 3, bootstrap)
    assert all(t.count_nonzero() == 0 for t in staged.tensors.values())  # nothing shared before the flush
    staging.flush(slots)
    for name in spec.names():
        assert torch.equal(staged[name], direct[name]), name
    assert direct["policy_versions"][2].tolist() == [7, 8, 9]


@pytest.mark.parametrize("env", ["gym/cartpole", "gym/multi_agent_toy"])
def test_a_field_declared_by_the_model_arrives_in_the_learners_batch(tmp_cfg, env):
    """One declaration (the model's `extra_trajectory_fields`), one producer (its `act`) and
    the field is in every batch the learner trains on, through real worker processes and
    whichever rollout worker the env needs (single-agent loop, agent rows)."""
    from sf_hydra.learner.ppo_learner import PPOLearner
    from sf_hydra.sampler.datamodule import SamplerDataModule
    from sf_hydra.sampler.env_info import describe_env

    cfg = tmp_cfg(f"env={env}", "model._target_=tests.helpers.recording_models.LogitsActorCritic")
    info = describe_env(cfg.env, seed=cfg.seed)
    plan = plan_for(cfg, info.observation_space, info.action_space, info.num_agents)
    learner = PPOLearner(plan.initial_policies, plan.learner, plan.spec)
    assert "behaviour_logits" in learner.spec
    data = SamplerDataModule(sampler_for(cfg, plan), plan.batches)
    data.setup("fit")
    try:
        batch = next(iter(data.train_dataloader()))
    finally:
        data.teardown("fit")
    logits = batch["behaviour_logits"]
    assert logits.shape == (*batch["actions"].shape, info.action_space.n)
    # The logits are those of the step that chose each action: they give its log-probability.
    chosen = torch.log_softmax(logits, -1).gather(-1, batch["actions"].unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(chosen, batch["log_probs"], rtol=1e-5, atol=1e-5)
    # The learner cuts the field into recurrence chunks with the others.
    batch.pop("meta")
    adv, targets, old_values = learner._advantages_and_targets(learner.model, batch, None, learner.algo.gamma)
    chunks = learner._chunks(batch, adv, targets, old_values, None)
    assert torch.equal(chunks["behaviour_logits"].reshape(logits.shape), logits)


def test_agent_rows_worker_steps_single_agent_envs_like_the_single_agent_loop(tmp_cfg):
    """`SingleEnvGroup` lets the agent-rows worker step plain gymnasium envs (what
    benchmarks/sampler_throughput.py's `rows` variant measures): whole CartPole episodes
    (reward 1 per step, a done at each end) in its slots, log-probs those of the policy."""
    from sf_hydra.core.trajectory import obs_fields_of
    from sf_hydra.sampler.agent_rows_worker import AgentRowsWorker
    from sf_hydra.sampler.env_info import describe_env

    cfg = tmp_cfg("hardware.serial_mode=true", "hardware.num_workers=1")
    info = describe_env(cfg.env, seed=cfg.seed)
    plan = plan_for(cfg, info.observation_space, info.action_space, info.num_agents)
    model = plan.initial_policies[0]
    sampler = sampler_for(cfg, plan)
    sampler.worker_cls = AgentRowsWorker
    sampler.publish(0, model, 0)
    sampler.start()
    try:
        assert isinstance(sampler.serial_workers[0], AgentRowsWorker)
        parts = []
        while sum(len(p["actions"]) for p in parts) < 16:
            traj = sampler.poll()
            parts.append(sampler.buffers.gather(torch.tensor(traj.slots)))
            sampler.free(traj.slots)
    finally:
        sampler.stop()
    batch = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    assert torch.equal(batch["rewards"], torch.ones_like(batch["rewards"]))
    assert batch["dones"].sum() >= 1 and batch["time_outs"].sum() == 0
    log_probs, _, _ = model.evaluate(obs_fields_of(batch), batch["actions"], None, None)
    torch.testing.assert_close(log_probs, batch["log_probs"], rtol=1e-5, atol=1e-5)
