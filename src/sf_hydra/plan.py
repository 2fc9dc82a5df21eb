"""One plan per run: everything that depends on the config and the env's spaces, resolved once.

`plan_run(cfg, env)` reads the config (after the validation stages passed) and the env's spaces
and returns a frozen `RunPlan`. The sampler, its batches and the learner are built from the plan's
typed pieces, never from the whole config: each consumer declares its own settings beside it
(`sampler/settings.py`: `SamplerSettings`, `WorkerSettings`, `BatchSettings`; `learner/learner_settings.py`:
`LearnerSettings`; `models/recipe.py`: `ModelRecipe`), and each of the keys those pieces hold is read
here, in one place (the model recipe's in `models/recipe.py`, which a loaded run's Policy shares). A piece
holds each value once: the sampler's settings hold the workers' (`SamplerSettings.workers`) rather than
copies of them. What a piece holds is what its consumer may depend on.

Invariants of a plan:
- `initial_policies` are the learner's models, built once from the run's random state: the rollout
  workers start from their weights and the learner trains these very modules (no second build
  that must draw the same random numbers);
- `spec` is the trajectory spec of those models acting in the env (one spec per run);
- `slots.total` shared trajectory slots are allocated, `slots.per_worker` owned by each worker.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Dict, Optional, Tuple

import gymnasium as gym
import torch
from omegaconf import OmegaConf

from sf_hydra.config.schema import AlgoConfig
from sf_hydra.core.seeding import rank_seed
from sf_hydra.core.spaces import obs_shapes
from sf_hydra.core.targets import build
from sf_hydra.core.trajectory import TrajectorySpec, model_trajectory_spec
from sf_hydra.envs import episode_stats, reward_shaping
from sf_hydra.learner.learner_settings import LearnerSettings, initial_hyperparams, shaping_hyperparams
from sf_hydra.models import build_model
from sf_hydra.models.recipe import ModelRecipe, model_recipe, plain
from sf_hydra.sampler.policy_mapping import env_policies
from sf_hydra.sampler.settings import (
    ActingSettings,
    BatchSettings,
    EnvLayout,
    EnvSettings,
    ProcessSettings,
    SamplerSettings,
    SeatSettings,
    Slots,
    Spaces,
    WorkerSettings,
    most_slots_per_batch,
)


def initial_overrides(cfg) -> Dict[int, Dict[str, float]]:
    """`pbt.initial_hyperparams` ({policy: {name: value}}) by the learner's policy index; with
    `pbt.workspace`, the entry of this run's member goes to its one policy."""
    given = {int(k): {n: float(v) for n, v in h.items()} for k, h in (cfg.pbt.initial_hyperparams or {}).items()}
    if cfg.pbt.workspace:
        return {0: given[cfg.pbt.member]} if cfg.pbt.member in given else {}
    return given


@dataclass(frozen=True)
class RunPlan:
    spaces: Spaces
    spec: TrajectorySpec
    initial_policies: Tuple[torch.nn.Module, ...]
    statistics: Tuple[str, ...]  # what the env reports at an episode's end (besides the return)
    learner_device: str
    sampler: SamplerSettings
    batches: BatchSettings
    learner: LearnerSettings


def resolved_recurrence(algo, use_rnn: bool) -> int:
    """Sample Factory's rule: -1 means the whole rollout for RNNs, 1 for feed-forward nets."""
    if algo.recurrence == -1:
        return algo.rollout if use_rnn else 1
    return algo.recurrence


def resolved_micro_batch(micro: int, recurrence: int, device: str, obs_space: gym.Space, bf16: bool = False) -> int:
    """hardware.learner_micro_batch with -1 resolved: for image observations on CPU, 256 samples, or 512 with
    bf16 forward passes (`bf16`: resolved_learner_bf16), rounded to whole recurrence chunks; else 0 (no
    split). These sizes cost the least CPU per sample (one thread; the figures: docs/results.md)."""
    if micro != -1:
        return micro
    has_images = any(len(shape) == 3 for shape in obs_shapes(obs_space).values())
    if not has_images or device != "cpu":
        return 0
    size = 512 if bf16 else 256
    return max(recurrence, size // recurrence * recurrence)


def native_bf16(device: str) -> bool:
    """Whether `device` computes bfloat16 natively: a CPU with AVX512-BF16 or AMX, a CUDA GPU that says so."""
    if device == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    cpu = torch.cpu
    return any(getattr(cpu, f, lambda: False)() for f in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"))


def resolved_learner_bf16(precision: str, device: str, obs_space: gym.Space) -> bool:
    """hardware.learner_precision with auto resolved: bf16 where it was measured to pay, image observations
    (conv encoders) on a CPU with native bf16 (benchmarks/learner_update.py; docs/results.md: CartPole's MLP
    gained nothing); fp32 elsewhere (CUDA: not measured yet)."""
    if precision != "auto":
        return precision == "bf16"
    has_images = any(len(shape) == 3 for shape in obs_shapes(obs_space).values())
    return has_images and device == "cpu" and native_bf16(device)


def resolved_acting_bf16(acting: str, learner_bf16: bool, precision: str) -> bool:
    """hardware.acting_precision with auto resolved: the acting copies' towers in bf16 wherever the learner's
    forward passes are (`learner_bf16`: resolved_learner_bf16, or hardware.precision bf16-mixed), so behaviour
    log-probs come from the arithmetic the learner's own come from; fp32 elsewhere."""
    if acting != "auto":
        return acting == "bf16"
    return learner_bf16 or precision == "bf16-mixed"


def slots_per_worker(algo, num_workers: int, rows_per_worker: int, agent_rows: bool) -> int:
    """Enough slots for the rows being filled plus `num_batches_to_accumulate` iterations
    waiting for the learner; beyond that the workers block (back-pressure). With several
    policies, at least one iteration per policy may wait: each policy's trajectories queue
    apart, and a queue short of a batch must not starve the others of slots. An agent-rows
    worker also holds, per row, a full slot waiting for its bootstrap value and, in sync
    mode, one completed early for the next round.

    Invariant with several policies: a worker blocks only when some policy has a full batch
    waiting (`policy_rounds` of the most trajectories a batch may take, `most_slots_per_batch`), so
    the learner does not wait for data while a worker waits for slots."""
    rows_total = num_workers * rows_per_worker
    traj_per_iteration = algo.batch_size * algo.num_batches_per_epoch // algo.rollout
    iterations = max(algo.num_batches_to_accumulate, algo.num_policies)
    rounds_waiting = math.ceil(iterations * traj_per_iteration / rows_total)
    if algo.num_policies > 1:
        most = most_slots_per_batch(traj_per_iteration, algo.num_policies)
        rounds_waiting = max(rounds_waiting, policy_rounds(algo.num_policies, most, rows_per_worker))
    return rows_per_worker * ((3 if agent_rows else 1) + max(1, rounds_waiting))


def policy_rounds(num_policies: int, traj_per_iteration: int, rows_per_worker: int) -> int:
    """Rounds of a worker's slots that may wait so that, when the worker blocks (it holds fewer
    than a round's slots free, so at least `rounds * rows_per_worker` of its own wait), some policy's
    queue holds a whole iteration. Each waiting trajectory is queued for at least one of the
    `num_policies` policies, so `num_policies * (traj_per_iteration - 1) + 1` waiting trajectories leave
    one policy `traj_per_iteration` (pigeonhole). Counting the whole sampler's slots instead (as with one
    policy) lets a worker block on slots queued apart, none a full batch, while the learner waits for
    data (measured: benchmarks/README.md, several_policies.py)."""
    return math.ceil((num_policies * (traj_per_iteration - 1) + 1) / rows_per_worker)


def slot_layout(cfg, num_agents: Optional[int]) -> Slots:
    hw = cfg.hardware
    agent_rows = num_agents is not None or bool(hw.batched_sampling)
    rows = hw.num_envs_per_worker * (num_agents or 1)
    return Slots(hw.num_workers, rows, slots_per_worker(cfg.algo, hw.num_workers, rows, agent_rows), agent_rows)


def sampler_settings(cfg, num_agents: Optional[int], recipe: ModelRecipe, learner_bf16: bool) -> SamplerSettings:
    """learner_bf16: whether the learner's forward passes are bf16 (resolved_learner_bf16), which acting follows."""
    hw = cfg.hardware
    servers = hw.inference_workers if str(hw.inference) == "server" else 0
    shaping = 2 * len(reward_shaping(cfg.env)) if cfg.pbt.with_pbt else 0
    return SamplerSettings(
        slots=slot_layout(cfg, num_agents), shaping_size=shaping, serial=bool(hw.serial_mode),
        inference_servers=servers, worker_start_timeout_sec=hw.worker_start_timeout_sec,
        workers=worker_settings(cfg, num_agents, recipe, learner_bf16),
    )


def fixed_env_policies(cfg, num_agents: Optional[int]) -> Optional[Tuple[int, ...]]:
    """Every env's policy for the whole run (worker by worker) when algo.policy_assignment resolves to fixed:
    several policies, single-agent envs stepped one by one, and (auto) envs that divide evenly among the
    policies (an explicit `fixed` that does not is refused: validation.py). None: each env
    draws its policy per episode (or batched sampling's worker -> policy, decided by the worker)."""
    algo, hw = cfg.algo, cfg.hardware
    n, envs = algo.num_policies, hw.num_workers * hw.num_envs_per_worker
    choice = str(algo.policy_assignment)
    if n == 1 or num_agents is not None or hw.batched_sampling or choice == "per_episode":
        return None
    if choice == "auto" and envs % n != 0:
        return None
    return env_policies(hw.num_workers, hw.num_envs_per_worker, n)


def worker_settings(cfg, num_agents: Optional[int], recipe: ModelRecipe, learner_bf16: bool) -> WorkerSettings:
    """num_agents: the env's agent count (None: a single-agent env); recipe: what the workers' policy copies are
    built from (the run's one ModelRecipe); learner_bf16: the learner's forward precision, which acting follows
    under hardware.acting_precision=auto."""
    algo, hw = cfg.algo, cfg.hardware
    return WorkerSettings(
        seed=None if cfg.seed is None else int(cfg.seed), rollout=algo.rollout, num_policies=algo.num_policies,
        sync=not algo.async_rl, stall_timeout_sec=float(hw.worker_stall_timeout_sec), envs=env_settings(cfg),
        layout=EnvLayout(num_envs_per_worker=hw.num_envs_per_worker, worker_num_splits=hw.worker_num_splits,
                         batched_sampling=bool(hw.batched_sampling), vector_backend=str(hw.vector_backend)),
        process=ProcessSettings(
            torch_threads=hw.torch_threads, worker_nice=hw.worker_nice,
            set_workers_cpu_affinity=bool(hw.set_workers_cpu_affinity),
            force_envs_single_thread=bool(hw.force_envs_single_thread),
            decorrelate_experience_max_seconds=float(hw.decorrelate_experience_max_seconds)),
        acting=ActingSettings(
            model=recipe, bf16=resolved_acting_bf16(str(hw.acting_precision), learner_bf16, str(hw.precision)),
            inference_device=str(hw.inference_device),
            inference_cuda_graphs=bool(hw.inference_cuda_graphs)),
        seats=SeatSettings(mix_policies_in_one_env=bool(cfg.pbt.mix_policies_in_one_env),
                           pool_size=cfg.selfplay.pool_size, latest_prob=float(cfg.selfplay.latest_prob),
                           env_policies=fixed_env_policies(cfg, num_agents)),
    )


def env_settings(cfg) -> EnvSettings:
    env, hw = cfg.env, cfg.hardware
    return EnvSettings(
        env=plain(env), env_id=str(env.id), reward_scale=float(env.reward_scale), reward_clip=float(env.reward_clip),
        frameskip=int(env.frameskip), replace_nonfinite=str(env.nonfinite) == "replace",
        max_env_restarts=hw.max_env_restarts, restart_hung_envs=bool(hw.restart_hung_envs),
        decorrelate_envs_on_one_worker=bool(hw.decorrelate_envs_on_one_worker),
    )


def batch_settings(cfg) -> BatchSettings:
    algo = cfg.algo
    return BatchSettings(
        traj_per_batch=algo.batch_size * algo.num_batches_per_epoch // algo.rollout,
        max_policy_lag=algo.max_policy_lag, pin_memory=cfg.hardware.device == "cuda", benchmark=bool(cfg.benchmark),
    )


def learner_settings(cfg, obs_space: gym.Space, bf16: bool) -> LearnerSettings:
    """bf16: the learner's forward passes in bf16 (resolved_learner_bf16)."""
    algo: AlgoConfig = OmegaConf.to_object(cfg.algo) if OmegaConf.is_config(cfg.algo) else cfg.algo
    recurrence = resolved_recurrence(algo, cfg.model.use_rnn)
    shaping = reward_shaping(cfg.env) if cfg.pbt.with_pbt else {}
    hyperparams = [{**initial_hyperparams(algo), **shaping_hyperparams(shaping)} for _ in range(algo.num_policies)]
    for k, overrides in initial_overrides(cfg).items():
        hyperparams[k].update(overrides)
    return LearnerSettings(
        algo=algo, recurrence=recurrence,
        micro_batch=resolved_micro_batch(cfg.hardware.learner_micro_batch, recurrence, str(cfg.hardware.device),
                                         obs_space, bf16),
        stats_avg=cfg.logger.stats_avg, train_for_env_steps=cfg.train_for_env_steps,
        benchmark=bool(cfg.benchmark), reward_shaping=shaping, hyperparams=tuple(hyperparams),
        optimizer=functools.partial(build, "algo.optimizer", cfg.algo.optimizer),
        bf16=bf16, compile=bool(cfg.hardware.learner_compile),
    )


def plan_run(cfg, env) -> RunPlan:
    """The run's plan for an env with `env.observation_space`, `env.action_space` and `env.num_agents`
    (sampler/env_info.py EnvInfo). Builds the `algo.num_policies` initial models from the current
    random state (seed it first): the learner trains these modules."""
    recipe = model_recipe(cfg)
    learner_bf16 = resolved_learner_bf16(str(cfg.hardware.learner_precision), str(cfg.hardware.device),
                                         env.observation_space)
    policies = tuple(build_model(recipe, env.observation_space, env.action_space) for _ in range(cfg.algo.num_policies))
    spec = model_trajectory_spec(env.observation_space, env.action_space, policies[0], cfg.algo.num_policies)
    return RunPlan(
        spaces=Spaces(env.observation_space, env.action_space, env.num_agents), spec=spec,
        initial_policies=policies, statistics=tuple(episode_stats(cfg.env)), learner_device=str(cfg.hardware.device),
        sampler=sampler_settings(cfg, env.num_agents, recipe, learner_bf16), batches=batch_settings(cfg),
        learner=learner_settings(cfg, env.observation_space, learner_bf16),
    )


def plan_for_rank(plan: RunPlan, rank: int, local_rank: int) -> RunPlan:
    """Learner rank `rank`'s plan in a data-parallel run: the same learner and initial policies (every rank
    starts from the same weights), its own sampler seed (seeding.rank_seed), its workers on the cores after
    those of the ranks before it on this node (`local_rank`) and its CUDA inference servers on its own GPU.
    Rank 0's plan is `plan` itself."""
    if rank == 0 and local_rank == 0:
        return plan
    workers = plan.sampler.workers
    first_core = local_rank * plan.sampler.slots.num_workers
    # inference servers on CUDA act on this rank's GPU, the one its learner trains on (Lightning: cuda:<local rank>)
    device = workers.acting.inference_device
    device = f"cuda:{local_rank}" if device == "cuda" else device
    workers = replace(workers, seed=rank_seed(workers.seed, rank),
                      process=replace(workers.process, first_core=first_core),
                      acting=replace(workers.acting, inference_device=device))
    return replace(plan, sampler=replace(plan.sampler, workers=workers))
