"""Typed schema of the config tree.

Every group is a dataclass registered in Hydra's ConfigStore, so an unknown key, a value
of the wrong type or one outside a key's choices (the Enums of `choices.py`) fails when
Hydra composes the config, before any process starts. Key names and defaults follow Sample
Factory 2.x where it has the same knob, so researchers can carry their intuitions over.
These defaults are the defaults: a yaml file under conf/ sets only what differs from them.
Rules that relate several keys live in `validation.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

from sf_hydra.config.choices import (
    ConvArchitecture,
    Device,
    LrSchedule,
    Nonlinearity,
    PolicyInitialization,
    Precision,
    RestartBehavior,
    RnnType,
)


@dataclass
class EnvConfig:
    """What every env family understands. Families extend it with their own keys."""

    family: str = MISSING  # the family's name (gym, doom, ...): a label; `factory` builds the envs
    # The family: {_target_: <dotted path of an sf_hydra.envs.EnvFamily subclass>}, set by the
    # family's config file (conf/env_family/<family>.yaml, or a user's own yaml).
    factory: Dict[str, Any] = MISSING
    name: str = MISSING  # short name, used for the default experiment name
    id: str = MISSING  # what the family's factory builds (a gymnasium id, a scenario)
    frameskip: int = 1  # action repeat; env-step counters and FPS count frames (x frameskip)
    obs_scale: float = 1.0  # observations are divided by this (255 for 8-bit pixels)
    obs_subtract_mean: float = 0.0  # and have this subtracted first
    reward_scale: float = 1.0  # rewards seen by the learner are multiplied by this
    reward_clip: float = 1000.0  # and clipped to [-reward_clip, reward_clip]
    max_episode_steps: Optional[int] = None  # time limit in agent steps (None: the env's own)
    kwargs: Dict[str, Any] = field(default_factory=dict)  # passed to the env's constructor


@dataclass
class ModelConfig:
    """Parts are `_target_` nodes (dotted paths, see sf_hydra/targets.py), called with run-time
    arguments after the node's own keys: the network `_target_(obs_shapes, action_space,
    model_cfg, env_cfg, algo_cfg)`, `encoder(obs_shapes, model_cfg)`, `core(in_size,
    model_cfg)` (when use_rnn) and `action_head(in_size, action_space, model_cfg)`."""

    _target_: str = "sf_hydra.models.ActorCritic"
    # The default encoder picks per observation key: a conv net for images, an MLP otherwise.
    encoder: Dict[str, Any] = field(default_factory=lambda: {"_target_": "sf_hydra.models.encoders.MultiKeyEncoder"})
    core: Dict[str, Any] = field(default_factory=lambda: {"_target_": "sf_hydra.models.cores.rnn_core"})
    action_head: Dict[str, Any] = field(
        default_factory=lambda: {"_target_": "sf_hydra.models.action_heads.make_action_head"})
    encoder_mlp_layers: List[int] = field(default_factory=lambda: [64, 64])  # SF: 512 x 2; tuned configs use 64 x 64
    encoder_conv_architecture: ConvArchitecture = ConvArchitecture.convnet_simple
    encoder_conv_mlp_layers: List[int] = field(default_factory=lambda: [512])
    use_rnn: bool = True
    rnn_type: RnnType = RnnType.gru
    rnn_size: int = 512
    rnn_num_layers: int = 1
    decoder_mlp_layers: List[int] = field(default_factory=list)
    nonlinearity: Nonlinearity = Nonlinearity.elu
    policy_initialization: PolicyInitialization = PolicyInitialization.orthogonal
    policy_init_gain: float = 1.0
    adaptive_stddev: bool = True  # Box actions: state-dependent std (else a learned vector)
    initial_stddev: float = 1.0
    continuous_tanh_scale: float = 0.0  # >0: means squashed as tanh(mu / s) * s (samples are clipped to the Box)
    tanh_squash_actions: bool = False  # Box actions = tanh(Gaussian sample) rescaled to the bounds (log-prob corrected)


@dataclass
class AlgoConfig:
    num_policies: int = 1  # policies trained jointly (several: multi-agent self-play, PBT)
    async_rl: bool = True
    rollout: int = 32
    recurrence: int = -1  # -1: rollout for RNNs, 1 for feed-forward nets
    batch_size: int = 1024
    num_batches_per_epoch: int = 1
    num_epochs: int = 1
    num_batches_to_accumulate: int = 2
    max_policy_lag: int = 1000
    shuffle_minibatches: bool = False
    gamma: float = 0.99
    gae_lambda: float = 0.95
    value_bootstrap: bool = False  # bootstrap from V(s) when an episode is truncated
    normalize_returns: bool = True
    normalize_input: bool = True
    ppo_clip_ratio: float = 0.1
    ppo_clip_value: float = 1.0
    value_loss_coeff: float = 0.5
    exploration_loss_coeff: float = 0.003
    learning_rate: float = 1e-4
    lr_schedule: LrSchedule = LrSchedule.constant
    lr_schedule_kl_threshold: float = 0.008
    lr_adaptive_min: float = 1e-6
    lr_adaptive_max: float = 1e-2
    adam_eps: float = 1e-6
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    # Called with the model's parameters. Sample Factory's keys above stay the one source of
    # the values: the node reads them by interpolation.
    optimizer: Dict[str, Any] = field(default_factory=lambda: {
        "_target_": "torch.optim.Adam", "_partial_": True, "lr": "${..learning_rate}", "eps": "${..adam_eps}",
        "betas": ["${...adam_beta1}", "${...adam_beta2}"],
    })
    max_grad_norm: float = 4.0


@dataclass
class HardwareConfig:
    device: Device = Device.cpu  # where the learner trains
    num_workers: int = 2
    num_envs_per_worker: int = 16
    # Splits of a worker's envs (2: double buffering). With the policy inside the worker, splits only
    # shrink its inference batches: 2 measured slower than 1 on the 2-core reference machine.
    worker_num_splits: int = 1
    serial_mode: bool = False
    batched_sampling: bool = False  # each split of a worker's envs is one vectorized env, stepped as one batch
    # batched_sampling's vectorized env: auto (the family's own, else sync), sync, or one the env
    # family offers (gym: envpool); the family's list is the choice (sampler/vector_envs.py)
    vector_backend: str = "auto"
    torch_threads: int = 1  # per process; more threads are far slower for small nets
    precision: Precision = Precision["32-true"]  # Lightning's names; bf16-mixed also when acting
    # Samples per learner forward/backward pass; a larger minibatch is split and its gradients
    # summed (the same gradient, one optimizer step). -1: auto (256 for image observations on
    # CPU, where it was measured ~2x faster per sample than 1024; else the whole minibatch);
    # 0: never split; N > 0: a multiple of the recurrence.
    learner_micro_batch: int = -1
    # Nice level of the rollout worker processes and their env processes (0-19). On a
    # CPU-bound machine the learner is the one serial stage; a lower worker priority lets it
    # have the core whenever both are ready (workers otherwise idle waiting for free slots).
    worker_nice: int = 5
    worker_start_timeout_sec: float = 120.0  # a worker that is not up by then is an error
    worker_stall_timeout_sec: float = 300.0  # no trajectory for this long is an error


@dataclass
class LoggerConfig:
    """Where scalars go: TensorBoard, Weights & Biases (W&B), or both (`logger=wandb`). W&B needs
    `pip install 'sf_hydra[wandb]'`; with WANDB_MODE=offline it writes <run_dir>/wandb for `wandb sync`."""

    tensorboard: bool = True  # event files in <run_dir>/tb
    log_interval_sec: float = 5.0  # console progress line
    experiment_summaries_interval: float = 10.0  # seconds between scalars (TensorBoard, W&B)
    stats_avg: int = 100  # episodes averaged for reward/length statistics
    with_wandb: bool = False  # also log to W&B: the same scalars and the resolved config
    wandb_user: Optional[str] = None  # W&B entity (user or team); None: your default entity
    wandb_project: str = "sf_hydra"  # W&B project
    wandb_group: Optional[str] = None  # W&B group; None: the sweep's name in --multirun, else no group
    wandb_job_type: str = "SF"  # W&B job type
    wandb_tags: List[str] = field(default_factory=list)  # W&B tags


@dataclass
class PbtConfig:
    """Population-based training over `algo.num_policies` policies (Sample Factory's pbt_* keys)."""

    with_pbt: bool = False
    period_env_steps: int = 5_000_000  # replace the worst policies with the best ones this often
    start_mutation: int = 20_000_000  # let the population diversify this long first
    replace_fraction: float = 0.3
    mutation_rate: float = 0.15
    replace_reward_gap: float = 0.1  # relative return gap needed to replace a policy
    replace_reward_gap_absolute: float = 1e-6
    optimize_gamma: bool = False
    target_objective: str = "true_objective"
    perturb_min: float = 1.1
    perturb_max: float = 1.5
    mix_policies_in_one_env: bool = True


@dataclass
class TrainConfig:
    env: Any = MISSING  # an EnvConfig subclass, chosen by the env family's file
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    pbt: PbtConfig = field(default_factory=PbtConfig)
    experiment: str = MISSING
    train_dir: str = "train_dir"
    run_dir: str = MISSING  # this run's folder: ${train_dir}/${experiment}, or its folder in a sweep
    sweep_name: str = "sweep"  # --multirun: the sweep's folder name (train.py derives it from the overrides)
    seed: Optional[int] = 0
    restart_behavior: RestartBehavior = RestartBehavior.resume
    train_for_env_steps: int = 10_000_000_000
    train_for_seconds: float = 10_000_000_000.0
    train_until_avg_return: Optional[float] = None  # stop once the full stats_avg window averages this (e.g. 475)
    save_every_sec: float = 120.0
    keep_checkpoints: int = 2


@dataclass
class EnjoyConfig:
    """`python enjoy.py`: which run to load and how to play it."""

    experiment: str = MISSING  # the run to load: ${train_dir}/${experiment}
    train_dir: str = "train_dir"
    run_dir: str = MISSING
    checkpoint: str = "last"  # last | a file in the run's checkpoints/ | a path
    episodes: int = 5
    deterministic: bool = False  # the most likely action instead of a sample
    render: bool = False  # a window (needs a display)
    video: bool = False  # save each episode as <run_dir>/enjoy/episode_NNN.gif
    max_episode_steps: Optional[int] = None  # cut episodes (agent steps)
    seed: Optional[int] = 0  # episode i is reset with seed + i (None: unseeded)
