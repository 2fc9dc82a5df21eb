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

from omegaconf import MISSING, OmegaConf

from sf_hydra.config.choices import (
    ActingPrecision,
    CheckpointKind,
    ConvArchitecture,
    Device,
    ExplorationLoss,
    InferencePlacement,
    Layout,
    LearnerPrecision,
    LrSchedule,
    NonFinite,
    Nonlinearity,
    OpponentSampling,
    OptimizerType,
    PixelFormat,
    PolicyAssignment,
    PolicyInitialization,
    Precision,
    ProgressStyle,
    RestartBehavior,
    RnnType,
    SweepObjective,
    VideoFormat,
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
    obs_subtract_mean: float = 0.0  # subtracted from observations before that division
    reward_scale: float = 1.0  # rewards seen by the learner are multiplied by this
    reward_clip: float = 1000.0  # then clipped to [-reward_clip, reward_clip]
    max_episode_steps: Optional[int] = None  # time limit in agent steps (None: the env's own)
    kwargs: Dict[str, Any] = field(default_factory=dict)  # passed to the env's constructor
    # a NaN or infinite reward or observation: error (stop, naming env, field and step) or replace (by 0, counted)
    nonfinite: NonFinite = NonFinite.error
    # layout of the env's image observations: CHW (used as they are) or HWC (transposed to CHW in the worker)
    pixel_format: PixelFormat = PixelFormat.CHW
    # each env counts its episodes: a finished episode's statistics get episode_number (0, 1, ... per env)
    episode_counter: bool = False


@dataclass
class ModelConfig:
    """Parts are `_target_` nodes (dotted paths, see sf_hydra/core/targets.py), called with run-time
    arguments after the node's own keys: the network `_target_(obs_shapes, action_space, recipe)`
    (sf_hydra.models.ModelRecipe), `encoder(obs_shapes, model_cfg)`, `core(in_size, model_cfg)` (when
    use_rnn) and `action_head(in_size, action_space, model_cfg)`; model_cfg is this node, a ModelConfig."""

    # the network, called as _target_(obs_shapes, action_space, recipe) (recipe: sf_hydra.models.ModelRecipe)
    _target_: str = "sf_hydra.models.ActorCritic"
    # The default encoder picks per observation key: a conv net for images, an MLP otherwise.
    encoder: Dict[str, Any] = field(default_factory=lambda: {"_target_": "sf_hydra.models.encoders.MultiKeyEncoder"})
    # the recurrent core (when use_rnn), called as core(in_size, model_cfg)
    core: Dict[str, Any] = field(default_factory=lambda: {"_target_": "sf_hydra.models.cores.rnn_core"})
    # the action distribution's head, called as action_head(in_size, action_space, model_cfg)
    action_head: Dict[str, Any] = field(
        default_factory=lambda: {"_target_": "sf_hydra.models.action_heads.make_action_head"})
    encoder_mlp_layers: List[int] = field(default_factory=lambda: [64, 64])  # encoder MLP sizes (SF: 512 x 2)
    encoder_conv_architecture: ConvArchitecture = ConvArchitecture.convnet_simple  # conv stack for image observations
    encoder_conv_mlp_layers: List[int] = field(default_factory=lambda: [512])  # MLP layers after the conv stack
    use_rnn: bool = True  # a recurrent core between the encoder and the heads (false: feed-forward)
    rnn_type: RnnType = RnnType.gru  # the recurrent core's cell
    rnn_size: int = 512  # hidden units of the recurrent core
    rnn_num_layers: int = 1  # stacked recurrent layers
    # MLP layers between the core and the heads (empty: none)
    decoder_mlp_layers: List[int] = field(default_factory=list)
    # one encoder-core-decoder tower for the actor and the critic (false: a tower each; RNN state doubles)
    actor_critic_share_weights: bool = True
    nonlinearity: Nonlinearity = Nonlinearity.elu  # activation of the encoder and decoder MLPs
    # weight initialization of the network's layers
    policy_initialization: PolicyInitialization = PolicyInitialization.orthogonal
    policy_init_gain: float = 1.0  # gain of that initialization
    # gain of the action head's orthogonal initialization (none with torch_default): a small gain gives
    # near-uniform actions at the start and little policy gradient into the shared layers; SF: policy_init_gain
    action_head_init_gain: float = 0.01
    adaptive_stddev: bool = True  # Box actions: state-dependent std (else a learned vector)
    initial_stddev: float = 1.0  # Box actions: the Gaussian's initial standard deviation
    continuous_tanh_scale: float = 0.0  # >0: means squashed as tanh(mu / s) * s (samples are clipped to the Box)
    tanh_squash_actions: bool = False  # Box actions = tanh(Gaussian sample) rescaled to the bounds (log-prob corrected)


@dataclass
class AlgoConfig:
    # Policies trained jointly, each with its own learner state (multi-agent self-play, PBT).
    # train_for_env_steps then counts each policy's own steps.
    num_policies: int = 1
    # Single-agent envs with several policies: fixed gives each policy an equal block of the run's envs for the
    # whole run (a split of envs then acts in one forward, each trajectory holds one policy's steps);
    # per_episode draws each env's policy at every episode start (Sample Factory); auto: fixed when the envs
    # (num_workers x num_envs_per_worker) are a multiple of num_policies, else per_episode. Multi-agent envs
    # draw their seats per episode (pbt.mix_policies_in_one_env, selfplay); batched sampling is fixed by worker
    policy_assignment: PolicyAssignment = PolicyAssignment.auto
    async_rl: bool = True  # APPO: workers sample while the learner trains (false: synchronous PPO rounds)
    rollout: int = 32  # agent steps per trajectory a worker hands to the learner
    recurrence: int = -1  # -1: rollout for RNNs, 1 for feed-forward nets
    batch_size: int = 1024  # transitions per minibatch (one optimizer step)
    num_batches_per_epoch: int = 1  # minibatches per learner iteration (its data: batch_size x this)
    num_epochs: int = 1  # passes over an iteration's data
    # Iterations' worth of trajectories that may wait for the learner. With several policies, more: each
    # worker's own slots may hold an iteration of every policy, less one trajectory each.
    num_batches_to_accumulate: int = 2
    max_policy_lag: int = 1000  # trajectories older than this many policy versions are dropped
    shuffle_minibatches: bool = False  # shuffle trajectories between minibatches each epoch
    gamma: float = 0.99  # discount factor
    gae_lambda: float = 0.95  # lambda of generalized advantage estimation
    value_bootstrap: bool = False  # bootstrap from V(s) when an episode is truncated
    normalize_returns: bool = True  # value targets normalized by their running mean and std
    normalize_input: bool = True  # observations normalized by their running mean and std
    # the Dict observation keys normalize_input normalizes (None: every key; a plain Box is the key obs)
    normalize_input_keys: Optional[List[str]] = None
    ppo_clip_ratio: float = 0.1  # PPO clips the probability ratio to [1 / (1 + c), 1 + c]
    ppo_clip_value: float = 1.0  # PPO value clipping: how far new values may move from the old ones
    # weight of the value loss, a mean squared error as Sample Factory's (SF's default 0.5; ours 0.25, the
    # weight the shipped configs were measured with)
    value_loss_coeff: float = 0.25
    exploration_loss_coeff: float = 0.003  # weight of the exploration loss (the entropy bonus by default)
    # entropy (maximize it) or symmetric_kl (minimize the symmetric KL to a uniform prior: unlike the
    # entropy it grows without bound as an action's probability goes to 0; discrete actions only)
    exploration_loss: ExplorationLoss = ExplorationLoss.entropy
    # weight of the exact KL(current || behaviour) penalty (PPO paper's fixed KL, in SF's direction); > 0
    # records the behaviour policy's distribution parameters in the trajectories
    kl_loss_coeff: float = 0.0
    with_vtrace: bool = False  # V-trace (IMPALA) value targets and advantages instead of GAE (gae_lambda unused)
    vtrace_rho: float = 1.0  # V-trace's rho_bar: truncation of the importance weights of TD errors (>= vtrace_c)
    vtrace_c: float = 1.0  # V-trace's c_bar: truncation of the traces; lower cuts variance, like gae_lambda < 1
    learning_rate: float = 1e-4  # the optimizer's learning rate (the start of lr_schedule)
    lr_schedule: LrSchedule = LrSchedule.constant  # constant, KL-adaptive (per minibatch or epoch) or linear decay to 0
    lr_schedule_kl_threshold: float = 0.008  # KL-adaptive: lr / 1.5 above 2x this KL, x 1.5 below half of it
    lr_adaptive_min: float = 1e-6  # KL-adaptive: the lowest learning rate
    lr_adaptive_max: float = 1e-2  # KL-adaptive: the highest learning rate
    adam_eps: float = 1e-6  # Adam's epsilon
    adam_beta1: float = 0.9  # Adam's beta1
    adam_beta2: float = 0.999  # Adam's beta2
    # Sample Factory's --optimizer: the class algo.optimizer's default _target_ names (adam: torch.optim.Adam;
    # lamb: sf_hydra.learner.lamb.Lamb); a _target_ of your own replaces it (then leave this at adam)
    optimizer_type: OptimizerType = OptimizerType.adam
    # Called with the model's parameters. Sample Factory's keys above stay the one source of
    # the values: the node reads them by interpolation, the learner sets the groups from them (each
    # policy's, PBT's included), and a value of the node's own that differs is refused.
    optimizer: Dict[str, Any] = field(default_factory=lambda: {
        "_target_": "${sf_optimizer:${..optimizer_type}}", "_partial_": True, "lr": "${..learning_rate}",
        "eps": "${..adam_eps}", "betas": ["${...adam_beta1}", "${...adam_beta2}"],
    })
    max_grad_norm: float = 4.0  # gradients clipped to this global norm (0: no clipping)
    # an update whose loss or gradients are not finite is skipped (counted); this many in a row stop the run
    nonfinite_updates_limit: int = 10


@dataclass
class HardwareConfig:
    device: Device = Device.cpu  # where the learner trains
    num_workers: int = 2  # rollout worker processes (auto: one per core this run may use)
    num_envs_per_worker: int = 16  # envs each worker steps
    # Splits of a worker's envs (2: double buffering). With the policy inside the worker, splits only
    # shrink its inference batches, so 1 (docs/results.md, "Inference placement").
    worker_num_splits: int = 1
    serial_mode: bool = False  # everything in one process (debugging)
    # a promise that two runs with this seed give bit-identical weights (and a resumed run the weights of one that
    # never stopped); settings under which it cannot hold are refused before any process starts (README)
    reproducible: bool = False
    batched_sampling: bool = False  # each split of a worker's envs is one vectorized env, stepped as one batch
    # batched_sampling's vectorized env: auto (the family's own, else sync), sync, or one the env
    # family offers (gym: envpool); the family's list is the choice (sampler/vector_envs.py)
    vector_backend: str = "auto"
    torch_threads: int = 1  # per process; more threads are far slower for small nets
    # Lightning's names: bf16-mixed autocasts the learner's whole training step (losses included), and acting
    # follows it (acting_precision=auto); learner_precision below is the narrower default (forward passes only)
    precision: Precision = Precision["32-true"]
    # The learner's forward passes in bfloat16 autocast (losses, advantages, optimizer in float32; with
    # precision=bf16-mixed both apply): auto = bf16 for image observations on a CPU with
    # native bf16 (AVX512-BF16 / AMX), where it costs less CPU per update, else fp32
    # (docs/results.md, "The learner's step")
    learner_precision: LearnerPrecision = LearnerPrecision.auto
    # The acting copies' towers (encoder, core, decoder) with bfloat16 weights, rounded once per weight copy,
    # under bf16 autocast (heads, normalizer and log-probs in float32): auto = bf16 wherever the learner's
    # forward is bf16 (learner_precision resolved to bf16, or precision=bf16-mixed), so acting computes as the
    # learner does, else fp32 (docs/results.md, "Acting in bf16")
    acting_precision: ActingPrecision = ActingPrecision.auto
    # torch.compile of the learner's forward pass (each policy's `evaluate`; the backward follows): less CPU
    # per update once compiled, at a compile cost of seconds to a minute at the run's start and at a new
    # minibatch shape (benchmarks/README.md "Learner update")
    learner_compile: bool = False
    # Samples per learner forward/backward pass; a larger minibatch is split and its gradients
    # summed (the same gradient, one optimizer step). -1: auto (for image observations on CPU 256 in
    # fp32 and 512 with bf16 forward passes (learner_precision), the sizes that cost the least CPU per
    # sample: cache sizes, docs/results.md; else the whole minibatch);
    # 0: never split; N > 0: a multiple of the recurrence.
    learner_micro_batch: int = -1
    # Nice level of the rollout worker processes and their env processes (0-19). On a
    # CPU-bound machine the learner is the one serial stage; a lower worker priority lets it
    # have the core whenever both are ready (workers otherwise idle waiting for free slots).
    worker_nice: int = 5
    worker_start_timeout_sec: float = 120.0  # a worker that is not up by then is an error
    # a worker that makes no progress for this long (an env step or reset that does not return) is named;
    # its env is restarted (max_env_restarts), or the run stops
    worker_stall_timeout_sec: float = 300.0
    # crashed (raised) or hung envs a worker re-creates per hour, dropping the episode in flight; past it, the run
    # stops with the env's traceback. 0: the first crash stops the run
    max_env_restarts: int = 5
    # also interrupt a hung env step (SIGALRM after worker_stall_timeout_sec) and re-create the env; it arms a
    # timer per env call (a cost on cheap envs: docs/results.md), so off by default: a hang is then named and
    # stops the run
    restart_hung_envs: bool = False
    # each worker sleeps a random time up to this before its first rollout, so workers do not run in lockstep
    decorrelate_experience_max_seconds: float = 0.0
    # env i of a worker first steps rollout x i random actions, so its envs' episodes do not end together
    decorrelate_envs_on_one_worker: bool = True
    # each rollout worker is pinned to one core (round robin over the cores this run may use)
    set_workers_cpu_affinity: bool = True
    # envs run with one thread in OpenMP/BLAS libraries (threadpoolctl and OMP/MKL variables in each worker)
    force_envs_single_thread: bool = False
    # keep the env's spaces in ~/.cache/sf_hydra/env_info (keyed by the env node and the env code's files): a second
    # start builds no probe env (SF: off, in train_dir; on here, as a probe Doom env costs seconds of every start)
    use_env_info_cache: bool = True
    # where the policy acts: in_worker (a copy in each rollout worker: best on few cores) or server (inference
    # processes batch the requests of all workers, e.g. on a GPU; the workers' splits then step while one waits)
    inference: InferencePlacement = InferencePlacement.in_worker
    # auto: before a new run starts, a probe of at most layout_probe_sec measures this machine and env (env step,
    # acting and learner costs, then short sampler runs of the likeliest layouts with the learner's passes in the
    # loop) and picks num_workers,
    # num_envs_per_worker, worker_num_splits and inference; config.yaml saves the pick, which a resume keeps
    # (no second probe). Those of the four typed on the command line are kept (docs/guides/throughput.md)
    layout: Layout = Layout.manual
    layout_probe_sec: float = 45.0  # hardware.layout=auto: the probe's time budget (10 to 60 seconds)
    inference_workers: int = 1  # inference server processes with inference=server (worker w uses server w mod n)
    inference_device: Device = Device.cpu  # where the inference servers act (cuda: a GPU shared with the learner)
    # with inference_device=cuda: each server replays its policy step as CUDA graphs, one per bucket of rows (powers
    # of two), inputs padded to the bucket (sampler/graphed_act.py); off until a GPU benchmark shows it pays
    inference_cuda_graphs: bool = False
    # Learner processes (Lightning's `devices`, ranks) per node and nodes (Lightning's `num_nodes`): above 1 the
    # run is data-parallel (Lightning's DDP, gloo on CPU, nccl on CUDA): every rank owns a whole sampler (these
    # num_workers, envs, slots and inference placement) and the ranks' gradients are averaged at every update
    devices: int = 1
    num_nodes: int = 1  # nodes of learner ranks (Lightning's num_nodes): above 1, a Slurm job or MASTER_ADDR+NODE_RANK
    # a collective (gradient all-reduce, the ranks' agreement on stopping) that waits this long for a rank ends
    # the run: a dead or hung rank stops every other one in bounded time
    ddp_timeout_sec: float = 120.0


@dataclass
class LoggerConfig:
    """Where scalars go: TensorBoard, Weights & Biases (W&B), or both (`logger=wandb`). W&B needs
    `pip install 'sf_hydra[wandb]'`; with WANDB_MODE=offline it writes <run_dir>/wandb for `wandb sync`."""

    tensorboard: bool = True  # event files in <run_dir>/tb
    log_interval_sec: float = 5.0  # seconds between console progress lines (the log file gets them too)
    # auto: a live progress bar on a terminal (frames, FPS over 10/60/300 s, return, policy lag, ETA), lines elsewhere
    progress: ProgressStyle = ProgressStyle.auto
    experiment_summaries_interval: float = 10.0  # seconds between scalars (TensorBoard, W&B)
    flush_summaries_interval: float = 30.0  # seconds between flushes of the TensorBoard event file
    # summaries' x-axis in frames (env steps x env.frameskip); false: agent steps (frames / frameskip)
    summaries_use_frameskip: bool = True
    stats_avg: int = 100  # episodes averaged for reward/length statistics
    with_wandb: bool = False  # also log to W&B: the same scalars and the resolved config
    wandb_user: Optional[str] = None  # W&B entity (user or team); None: your default entity
    wandb_project: str = "sf_hydra"  # W&B project
    wandb_group: Optional[str] = None  # W&B group; None: the sweep's name in --multirun, else no group
    wandb_job_type: str = "SF"  # W&B job type
    wandb_tags: List[str] = field(default_factory=list)  # W&B tags
    # Lightning loggers of your own, appended to TensorBoard/W&B: {name: {_target_: a Logger class, its arguments}},
    # e.g. +logger.extra.csv._target_=lightning.pytorch.loggers.CSVLogger +logger.extra.csv.save_dir='${run_dir}'
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class PbtConfig:
    """Population-based training over `algo.num_policies` policies (Sample Factory's pbt_* keys)."""

    with_pbt: bool = False  # population-based training (learner/pbt.py says how it decides)
    period_env_steps: int = 5_000_000  # a policy's own env steps between two looks at it
    start_mutation: int = 20_000_000  # a policy's env steps before the first look (the population diversifies)
    replace_fraction: float = 0.3  # the best and the worst ceil(fraction x N) policies: donors and replaced
    mutation_rate: float = 0.15  # chance that each hyperparameter of a looked-at policy is perturbed
    replace_reward_gap: float = 0.1  # a donor must lead by more than this fraction of its own objective
    replace_reward_gap_absolute: float = 1e-6  # ... and by more than this
    optimize_gamma: bool = False  # also perturb gamma (each policy's own discount)
    # also perturb Adam's adam_beta1, adam_beta2 and adam_eps (ours: Sample Factory tunes none of them)
    optimize_adam: bool = False
    # What policies are ranked by: true_objective (the average return without a policy's own
    # reward-shaping bonus, or the env's own true_objective episode statistic when it reports one)
    # or a statistic the env reports at an episode's end, e.g. Doom's FRAGCOUNT (env.episode_stats), or with
    # evaluation during training (eval.*) eval/return: each policy's latest evaluation
    target_objective: str = "true_objective"
    perturb_min: float = 1.1  # a perturbed value is multiplied or divided by a factor in [perturb_min, perturb_max]
    perturb_max: float = 1.5  # the largest perturbation factor
    # A policy's own starting hyperparameters, {policy: {name: value}} (names: algo.* keys PBT
    # tunes, config/choices.py PBT_HYPERPARAMS); e.g. {1: {learning_rate: 3e-4}}. A value named here
    # is not perturbed at the start (policies 1..N-1 are, as in Sample Factory; policy 0 never is)
    initial_hyperparams: Dict[int, Dict[str, float]] = field(default_factory=dict)
    # PBT across runs: a folder that several runs (one policy each) share, e.g. on a cluster's
    # shared disk; each run is one member (pbt.member) of the population, member 0 the reference;
    # the population is the members that published, ranked once each has an objective. None: within this run
    workspace: Optional[str] = None
    member: int = -1  # with pbt.workspace: this run's member index (0, 1, ...), unique in the workspace
    # Several policies, multi-agent envs: each agent of an env gets its own random policy per episode
    # (true), or all agents of an env share one, drawn per episode (false).
    mix_policies_in_one_env: bool = True


@dataclass
class SelfPlayConfig:
    """Self-play against past selves (beyond Sample Factory): frozen snapshots of the
    trained policies, kept in `<run_dir>/selfplay/`, take opponent seats in multi-agent envs.
    One seat of each env episode is a trained policy's; every other seat is taken by a trained
    policy with probability `latest_prob`, else by a snapshot drawn from the pool (uniformly, or
    with `opponent_sampling`'s odds). Every player is rated from the games (`ratings`)."""

    pool_size: int = 0  # snapshots kept (the oldest is replaced); 0: no pool, policies play each other
    snapshot_every_env_steps: int = 1_000_000  # a policy's own env steps between two of its snapshots
    latest_prob: float = 0.5  # an opponent seat goes to a trained policy with this probability
    # uniform | hard | variance: prioritized fictitious self-play on the policy's win rate p against
    # each snapshot (hard: weight (1-p)^pfsp_exponent; variance: p(1-p)), as AlphaStar's league
    opponent_sampling: OpponentSampling = OpponentSampling.uniform
    pfsp_exponent: float = 2.0  # opponent_sampling=hard: larger favours the snapshots the policy loses to
    # rate every policy and snapshot from their games (openskill's Plackett-Luce), in multi-agent runs with
    # a pool or several policies: <run_dir>/selfplay/ratings.json and TensorBoard selfplay/rating/*
    ratings: bool = True


@dataclass
class EvalConfig:
    """Evaluation during training (sf_hydra.evaluation, beyond Sample Factory): every `every_env_steps` env
    steps and/or every `every_sec` seconds a process of its own plays `episodes` games with each trained
    policy's current weights, on envs seeded apart from the training ones (sf_hydra.core.seeding), and writes
    eval/* scalars (TensorBoard, W&B) and <run_dir>/eval/evaluations.jsonl. Off while both are 0."""

    every_env_steps: int = 0  # the run's env steps (frames) between two evaluations; 0: not by env steps
    every_sec: float = 0.0  # seconds of training between two evaluations; 0: not by time
    episodes: int = 10  # games per policy and evaluation
    deterministic: bool = True  # the most likely action (false: sampled, as in training)
    max_episode_steps: Optional[int] = None  # cut an evaluation game after this many agent steps (None: never)
    # keys of the `env` node that the evaluation envs change, e.g. {doom_skill: 5} or {id: ...}: a harder
    # difficulty, another map (the spaces must stay the training env's)
    env_overrides: Dict[str, Any] = field(default_factory=dict)
    video_every: int = 0  # a video of policy 0's first game every this many evaluations (0: none)
    video_format: VideoFormat = VideoFormat.auto  # auto: mp4 when imageio-ffmpeg is installed, else gif
    video_frames: Optional[int] = 1000  # a video's frames at most (the game plays on); None: the whole game
    # train_until_avg_return compares each policy's latest evaluation return (mean over `episodes` games)
    # instead of its training window's average
    stop_on_eval_return: bool = False


@dataclass
class TrainConfig:
    env: Any = MISSING  # an EnvConfig subclass, chosen by the env family's file
    # the algorithm: APPO or synchronous PPO (algo=appo|ppo) and its hyperparameters
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    model: ModelConfig = field(default_factory=ModelConfig)  # the actor-critic network
    hardware: HardwareConfig = field(default_factory=HardwareConfig)  # processes, envs, device and precision
    # TensorBoard, W&B, the console line and episode statistics
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    pbt: PbtConfig = field(default_factory=PbtConfig)  # population-based training
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)  # an opponent pool of past selves
    eval: EvalConfig = field(default_factory=EvalConfig)  # evaluation during training (off by default)
    experiment: str = MISSING  # the run's name: its folder is ${train_dir}/${experiment}
    train_dir: str = "train_dir"  # where runs (and --multirun sweeps, under multirun/) live
    run_dir: str = MISSING  # this run's folder: ${train_dir}/${experiment}, or its folder in a sweep
    sweep_name: str = "sweep"  # --multirun: the sweep's folder name (train.py derives it from the overrides)
    seed: Optional[int] = 0  # seeds random, numpy, torch and the envs (None: unseeded)
    # an existing run folder: resume from last.ckpt, restart (move it aside) or overwrite it
    restart_behavior: RestartBehavior = RestartBehavior.resume
    train_for_env_steps: int = 10_000_000_000  # stop after this many env steps (frames: agent steps x env.frameskip)
    train_for_seconds: float = 10_000_000_000.0  # stop after this much training time (summed across resumes)
    train_until_avg_return: Optional[float] = None  # stop once the full stats_avg window averages this (e.g. 475)
    # what the run returns to a --multirun sweeper (hydra/sweeper=optuna maximizes it): avg_return, the final average
    # return; time_to_target, minus the training seconds until train_until_avg_return stopped the run (which needs a
    # target), a run that did not reach it scoring below every run that did (sf_hydra.app.objective.sweep_score)
    sweep_objective: SweepObjective = SweepObjective.avg_return
    save_every_sec: float = 120.0  # seconds between checkpoints
    keep_checkpoints: int = 2  # numbered checkpoints kept besides last.ckpt
    # seconds between milestone checkpoints (checkpoints/milestones/, never pruned); -1: none
    save_milestones_sec: float = -1.0
    save_best_every_sec: float = 5.0  # seconds between checks for a new best checkpoint (checkpoints/best_p<k>.ckpt)
    # the episode statistic best checkpoints maximize, per policy: reward (= episode/return: the average return
    # over logger.stats_avg episodes, PBT's reward-shaping bonus included; true_objective: PBT's ranking, the env's
    # own true_objective statistic where it reports one, else the same return without that bonus), len (episode/length),
    # selfplay/vs_pool_{win,draw,loss}_rate; with evaluation on (eval.*): eval/return or eval/length, each
    # policy's latest evaluation (checked when its result arrives)
    save_best_metric: str = "reward"
    save_best_after: int = 100_000  # a policy's own env steps before its best checkpoints start (skips lucky starts)
    # a resume starts from latest (last.ckpt) or best (policy 0's best checkpoint)
    load_checkpoint_kind: CheckpointKind = CheckpointKind.latest
    # the sampler's ceiling: workers sample, trajectories are dropped unlearned (weights fixed), no checkpoints
    benchmark: bool = False
    # Lightning's Trainer: {_target_, its arguments} (conf/trainer/default.yaml); train.py adds loggers and callbacks
    trainer: Dict[str, Any] = MISSING
    # The run's Lightning callbacks, {name: {_target_, its arguments}} (conf/callbacks/default.yaml); add your own
    # with +callbacks.<name>._target_=<dotted path>, drop one with ~callbacks.<name>; `_enabled_: false` skips a node
    callbacks: Dict[str, Any] = MISSING
    # code a run folder's saved config may name beyond sf_hydra's own parts (module prefixes or exact dotted paths,
    # e.g. [mylab.envs]): for runs from elsewhere (docs/guides/security.md); never read from a saved config
    trusted_targets: List[str] = field(default_factory=list)


def typed_group(cls, node):
    """`node` as a `cls` instance (a config group's dataclass): a `cls` as it is; a DictConfig of the group (as
    `${eval}` in conf/callbacks passes it) or a mapping of some of its fields (tests) over the group's defaults,
    checked against its types. A callback takes its group whole this way, so a key added to the group needs
    no line in conf/callbacks."""
    if isinstance(node, cls):
        return node
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), node))


@dataclass
class EnjoyConfig:
    """`python enjoy.py`: which run to load and how to play it."""

    experiment: str = MISSING  # the run to load: ${train_dir}/${experiment}
    train_dir: str = "train_dir"  # where runs live
    run_dir: str = MISSING  # the run's folder: ${train_dir}/${experiment}, or a run's folder in a sweep
    checkpoint: str = "last"  # last | a file in the run's checkpoints/ | a path
    # latest: `checkpoint`; best: the best checkpoint of `policy` (checkpoints/best_p<policy>.ckpt)
    load_checkpoint_kind: CheckpointKind = CheckpointKind.latest
    episodes: int = 5  # episodes to play
    deterministic: bool = False  # the most likely action instead of a sample
    render: bool = False  # a window (needs a display)
    video: bool = False  # save each episode as <run_dir>/enjoy/episode_NNN.mp4 (or .gif; video_format)
    video_format: VideoFormat = VideoFormat.auto  # auto: mp4 when imageio-ffmpeg is installed, else gif
    video_frames: Optional[int] = None  # a video's frames at most (the episode plays on); None: the whole episode
    max_episode_steps: Optional[int] = None  # cut episodes (agent steps)
    seed: Optional[int] = 0  # episode i is reset with seed + i (None: unseeded)
    policy: int = 0  # which trained policy plays, for a run with algo.num_policies > 1
    # Multi-agent envs: the trained policy of each agent seat, e.g. [0, 1]; None: agent 0 plays `policy`,
    # agent i the policy (policy + i) mod algo.num_policies. Videos show agent 0's view.
    agent_policies: Optional[List[int]] = None
    push_to_hub: bool = False  # after playing, push the run to hf_repository as `sf-push` does (the hub extra)
    hf_repository: Optional[str] = None  # the Hugging Face Hub repo (user/name) push_to_hub uploads to
    # code the run's saved config may name beyond sf_hydra's own parts (module prefixes or exact dotted paths):
    # for runs from elsewhere (docs/guides/security.md); your own runs need none
    trusted_targets: List[str] = field(default_factory=list)
