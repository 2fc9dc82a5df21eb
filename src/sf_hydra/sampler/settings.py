"""The sampler's settings: the env's spaces, the layout of the shared trajectory slots, what the Sampler,
each rollout worker process (and inference server) and the training batches decide with. The run's plan
(sf_hydra/plan.py) fills them from the config, once; they reach worker processes by pickle, so they hold
plain values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

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
class EnvSettings:
    """How a worker builds its envs and treats what they return: the env node, the rewards' scale and clip,
    non-finite values, restarts of an env that crashes or hangs, the random steps that spread episodes."""

    env: Dict[str, Any] = field(repr=False)  # the env node, resolved: each worker builds its envs from it
    env_id: str  # named in messages about an env
    reward_scale: float
    reward_clip: float
    frameskip: int
    replace_nonfinite: bool  # env.nonfinite=replace (else a non-finite value stops the run)
    max_env_restarts: int  # per hour and worker
    restart_hung_envs: bool
    decorrelate_envs_on_one_worker: bool  # random steps after each env's first reset (rollout x its index)


@dataclass(frozen=True)
class EnvLayout:
    """The envs of one worker: how many, in how many splits (double buffering), stepped one by one or as
    vector envs of a backend."""

    num_envs_per_worker: int
    worker_num_splits: int
    batched_sampling: bool
    vector_backend: str


@dataclass(frozen=True)
class ProcessSettings:
    """The worker process itself, set up before it builds anything (rollout_worker.worker_process_main; the
    inference server takes its threads): threads, priority, cores, and its pause before the first rollout."""

    torch_threads: int
    worker_nice: int
    set_workers_cpu_affinity: bool
    force_envs_single_thread: bool
    decorrelate_experience_max_seconds: float
    first_core: int = 0  # worker w pins itself to core first_core + w (round robin): ranks on one node share cores


@dataclass(frozen=True)
class ActingSettings:
    """The policy copies that act, in a worker or an inference server: what they are built from, in which
    precision and on which device."""

    model: ModelRecipe
    # the towers' weights in bfloat16, acting under bf16 autocast (ActorCritic.act_in_bf16): as the learner's
    # forward computes (hardware.acting_precision, plan.resolved_acting_bf16)
    bf16: bool
    inference_device: str
    inference_cuda_graphs: bool = False  # an inference server on CUDA replays its policy step as CUDA graphs


@dataclass(frozen=True)
class SeatSettings:
    """Which policy takes an env's seats (sampler/policy_mapping.py): several policies in one env, and the
    opponent pool's snapshots (self-play)."""

    mix_policies_in_one_env: bool
    pool_size: int
    latest_prob: float
    # algo.policy_assignment=fixed (single-agent envs): every env's policy for the whole run, worker by worker
    # (policy_mapping.env_policies); None: each env's policy is drawn per episode
    env_policies: Optional[Tuple[int, ...]] = None


@dataclass(frozen=True)
class WorkerSettings:
    """What a rollout worker process (and an inference server) decides with, grouped by what reads it; it
    reaches them by pickle, so it holds plain values only. The few that every part reads stay at the top."""

    seed: Optional[int]
    rollout: int
    num_policies: int
    sync: bool  # synchronous PPO rounds (algo.async_rl=false)
    stall_timeout_sec: float  # the hang timer of an env call and the wait for an inference server's answer
    envs: EnvSettings
    layout: EnvLayout
    process: ProcessSettings
    acting: ActingSettings
    seats: SeatSettings


@dataclass(frozen=True)
class SamplerSettings:
    """What the Sampler itself decides with. What its workers decide with too (rollout, policies, the stall
    timeout, the envs, the opponent pool, the inference device) it reads from `workers`, the one place each
    value is held."""

    slots: Slots
    shaping_size: int  # numbers per policy of reward-shaping difference (0: PBT does not shape rewards)
    serial: bool
    inference_servers: int  # 0: each worker acts with its own policy copy (hardware.inference=in_worker)
    worker_start_timeout_sec: float
    workers: WorkerSettings  # what each worker process and inference server gets

    @property
    def stall_limit(self) -> float:
        """Seconds without progress before the learner gives up on a worker (or on all of them): half as long
        again when a worker re-creates a hung env itself."""
        envs = self.workers.envs
        restarts_hung_envs = envs.max_env_restarts > 0 and envs.restart_hung_envs and not self.serial
        return self.workers.stall_timeout_sec * (1.5 if restarts_hung_envs else 1.0)


@dataclass(frozen=True)
class BatchSettings:
    """What TrainingBatches needs, beyond its sampler's settings, to turn trajectories into one policy's
    batches."""

    traj_per_batch: int  # algo.batch_size x num_batches_per_epoch / rollout
    max_policy_lag: int
    pin_memory: bool  # a CUDA learner: batches are gathered into pinned staging memory
    benchmark: bool  # trajectories are counted, not copied (the sampler's ceiling)


def most_slots_per_batch(traj_per_batch: int, num_policies: int) -> int:
    """The most trajectories one asynchronous batch of one policy may take. With several policies a
    batch takes trajectories until it holds `traj_per_batch` x rollout of its policy's own transitions
    (a trajectory whose row changed policy at an episode's end holds fewer), so it may take more than
    `traj_per_batch`; a quarter more at most, which also bounds the slots a worker needs
    (plan.policy_rounds) and a CUDA learner's pinned staging. One policy: exactly `traj_per_batch`."""
    return traj_per_batch if num_policies == 1 else traj_per_batch + -(-traj_per_batch // 4)
