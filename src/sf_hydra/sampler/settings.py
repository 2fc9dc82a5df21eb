"""The sampler's settings: the env's spaces, the layout of the shared trajectory slots, what the Sampler,
each rollout worker process (and inference server) and the training batches decide with. The run's plan
(sf_hydra/plan.py) fills them from the config, once; they reach worker processes by pickle, so they hold
plain values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import gymnasium as gym

from sf_hydra.models.recipe import ModelRecipe


@dataclass(frozen=True)
class Spaces:
    """One agent's spaces, and the agent count of a multi-agent env (None: a single-agent env)."""

    observation: gym.Space
    action: gym.Space
    num_agents: Optional[int] = None


@dataclass(frozen=True)
class Slots:
    """How the shared trajectory slots are laid out. Invariant: worker w owns slots
    [w * per_worker, (w + 1) * per_worker); one synchronous round fills `rows_total` of them."""

    num_workers: int
    rows_per_worker: int  # envs x agents (one row per agent or sub-env)
    per_worker: int
    agent_rows: bool  # AgentRowsWorker (multi-agent or batched sampling) rather than SingleAgentWorker

    @property
    def total(self) -> int:
        return self.num_workers * self.per_worker

    @property
    def rows_total(self) -> int:
        return self.num_workers * self.rows_per_worker


@dataclass(frozen=True)
class WorkerSettings:
    """What a rollout worker process (and an inference server) decides with; it reaches them by
    pickle, so it holds plain values only."""

    seed: Optional[int]
    rollout: int
    num_policies: int
    sync: bool  # synchronous PPO rounds (algo.async_rl=false)
    env: Dict[str, Any] = field(repr=False)  # the env node, resolved: each worker builds its envs from it
    env_id: str
    reward_scale: float
    reward_clip: float
    frameskip: int
    replace_nonfinite: bool  # env.nonfinite=replace (else a non-finite value stops the run)
    num_envs_per_worker: int
    worker_num_splits: int
    batched_sampling: bool
    vector_backend: str
    max_env_restarts: int  # per hour and worker
    restart_hung_envs: bool
    stall_timeout_sec: float
    bf16: bool  # act in bfloat16 autocast, as the learner computes (hardware.precision=bf16-mixed)
    mix_policies_in_one_env: bool
    pool_size: int
    latest_prob: float
    decorrelate_envs_on_one_worker: bool
    decorrelate_experience_max_seconds: float
    torch_threads: int
    worker_nice: int
    set_workers_cpu_affinity: bool
    force_envs_single_thread: bool
    inference_device: str
    model: ModelRecipe
    inference_cuda_graphs: bool = False  # an inference server on CUDA replays its policy step as CUDA graphs
    first_core: int = 0  # worker w pins itself to core first_core + w (round robin): ranks on one node share cores


@dataclass(frozen=True)
class SamplerSettings:
    """What the Sampler itself decides with (its workers get `worker_config`)."""

    slots: Slots
    rollout: int
    num_policies: int
    pool_size: int  # the opponent pool's slots (selfplay.pool_size), after the trained policies' stores
    shaping_size: int  # numbers per policy of reward-shaping difference (0: PBT does not shape rewards)
    serial: bool
    inference_servers: int  # 0: each worker acts with its own policy copy (hardware.inference=in_worker)
    inference_device: str
    num_envs_per_worker: int
    worker_start_timeout_sec: float
    worker_stall_timeout_sec: float
    restarts_hung_envs: bool  # a worker re-creates a hung env itself: the stall limit grows by half
    env_id: str  # named in messages about a stuck env
    workers: WorkerSettings  # what each worker process and inference server gets

    @property
    def stall_limit(self) -> float:
        """Seconds without progress before the learner gives up on a worker (or on all of them)."""
        return self.worker_stall_timeout_sec * (1.5 if self.restarts_hung_envs and not self.serial else 1.0)


@dataclass(frozen=True)
class BatchSettings:
    """What TrainingBatches needs to turn trajectories into one policy's batches."""

    traj_per_batch: int  # algo.batch_size x num_batches_per_epoch / rollout
    sync: bool  # synchronous PPO rounds (algo.async_rl=false)
    num_policies: int
    frameskip: int
    max_policy_lag: int
    pin_memory: bool  # a CUDA learner: batches are gathered into pinned staging memory
    benchmark: bool  # trajectories are counted, not copied (the sampler's ceiling)
    stall_timeout_sec: float  # hardware.worker_stall_timeout_sec, named in the stall message
