"""The fixed sets of values a string key may take, each declared once as an Enum.

The schema types its keys with these, so Hydra refuses a value outside the set when it
composes the config (before any process starts), naming the key, the value and the
allowed names. Invariants every choice keeps:

- a member's name is its value, so the spelling a user types, the one `config.yaml` saves
  (OmegaConf writes enums by name) and the one code compares with are the same text;
- members are `str`: `cfg.model.rnn_type == "gru"`, dict lookups by the plain string, `str()`
  and f-strings all behave as with the plain string. This holds in worker processes too,
  which receive `OmegaConf.to_container(cfg, resolve=True)` (the members themselves,
  pickled by value) and re-create an untyped config from it.
"""

from __future__ import annotations

from enum import Enum


class Choice(str, Enum):
    """Base of every choice: prints, formats and reprs as its value (Python's defaults for a
    str mixin give `RnnType.gru` and `<RnnType.gru: 'gru'>`), so messages such as
    ConfigError's `key='value' is not allowed` read as for the plain string."""

    def __repr__(self) -> str:
        return repr(self.value)

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class OpponentSampling(Choice):
    """How an opponent seat draws a snapshot from the pool (learner/league.py): uniformly, or by
    prioritized fictitious self-play on the learning policy's win rate p against each snapshot."""

    uniform = "uniform"
    hard = "hard"  # weight (1 - p) ** selfplay.pfsp_exponent: the snapshots it does not beat yet
    variance = "variance"  # weight p (1 - p): the snapshots it beats about half of the time


class PolicyAssignment(Choice):
    """Which trained policy acts in each env of a single-agent env run with several policies
    (sampler/policy_mapping.py): each env one policy for the whole run, or one drawn per episode (Sample
    Factory's way); auto: fixed where the envs divide evenly among the policies."""

    auto = "auto"
    fixed = "fixed"  # the run's envs in equal blocks, one per policy: a split acts in one forward
    per_episode = "per_episode"  # each episode of an env draws its policy


class RestartBehavior(Choice):
    """What a run does with an existing run folder (see sf_hydra.core.run_dir.prepare)."""

    resume = "resume"
    restart = "restart"
    overwrite = "overwrite"


class CheckpointKind(Choice):
    """Which checkpoint a resume (train.py) or enjoy.py loads: last.ckpt, or the best one."""

    latest = "latest"
    best = "best"


class Device(Choice):
    """Where the learner trains (hardware.device), or where the inference server acts (inference_device)."""

    cpu = "cpu"
    cuda = "cuda"


class Layout(Choice):
    """Who picks the sampler's layout (hardware.num_workers, num_envs_per_worker, worker_num_splits,
    inference): the config as it stands, or a probe of this machine and env before a new run starts
    (app/layout_probe.py), which writes its pick into the run's config."""

    manual = "manual"
    auto = "auto"


class InferencePlacement(Choice):
    """Where the policy acts for the rollout workers: a copy inside each worker, or batched in
    inference server processes that serve every worker (sampler/inference_server.py)."""

    in_worker = "in_worker"
    server = "server"


# Lightning's own precision names, passed to its Trainer as they are; they are not Python
# identifiers, hence the functional form (members are looked up as Precision["bf16-mixed"]).
# bf16-mixed also autocasts the policy copies that act in rollout workers.
Precision = Choice("Precision", {"32-true": "32-true", "bf16-mixed": "bf16-mixed"}, module=__name__)


class LearnerPrecision(Choice):
    """The learner's forward passes (hardware.learner_precision): bfloat16 autocast or float32; the
    losses, advantages and optimizer always in float32. auto: plan.py resolved_learner_bf16."""

    auto = "auto"
    fp32 = "fp32"
    bf16 = "bf16"


class ActingPrecision(Choice):
    """The towers of the policy copies that act (hardware.acting_precision): weights in bfloat16 or float32;
    the heads and what acting returns always in float32. auto: plan.py resolved_acting_bf16."""

    auto = "auto"
    fp32 = "fp32"
    bf16 = "bf16"


class ConvArchitecture(Choice):
    """Conv stacks of sf_hydra.models.encoders.CONV_ARCHITECTURES and RESNET_ARCHITECTURES."""

    convnet_simple = "convnet_simple"
    convnet_atari = "convnet_atari"
    convnet_impala = "convnet_impala"  # IMPALA's shallow net: conv 16 8x8/4, conv 32 4x4/2
    resnet_impala = "resnet_impala"  # IMPALA's deep net: 3 stages (16, 32, 32) of conv, max-pool, 2 residual blocks


class NonFinite(Choice):
    """What a rollout worker does with a NaN or infinite reward or observation from an env."""

    error = "error"  # stop the run, naming the env, the field and the step
    replace = "replace"  # replace it by 0 and count it (TensorBoard env/nonfinite_values)


class PixelFormat(Choice):
    """The layout of an env's image observations (env.pixel_format); the conv encoder takes CHW."""

    CHW = "CHW"  # channels first, as the atari, doom and dmlab families emit them: used as they are
    HWC = "HWC"  # channels last (most gymnasium pixel envs): transposed to CHW as they leave the env


class RnnType(Choice):
    gru = "gru"
    lstm = "lstm"


class Nonlinearity(Choice):
    elu = "elu"
    relu = "relu"
    tanh = "tanh"


class VideoFormat(Choice):
    """How enjoy.py saves an episode's video: auto is mp4 when imageio-ffmpeg is installed, else gif."""

    auto = "auto"
    mp4 = "mp4"
    gif = "gif"


class ProgressStyle(Choice):
    """The console's progress: auto is a live bar on a terminal and periodic lines elsewhere."""

    auto = "auto"
    bar = "bar"
    lines = "lines"


class PolicyInitialization(Choice):
    orthogonal = "orthogonal"
    xavier_uniform = "xavier_uniform"
    torch_default = "torch_default"


class LrSchedule(Choice):
    constant = "constant"
    kl_adaptive_minibatch = "kl_adaptive_minibatch"
    kl_adaptive_epoch = "kl_adaptive_epoch"
    linear_decay = "linear_decay"  # to 0 at train_for_env_steps


class ExplorationLoss(Choice):
    """What the exploration term (weight algo.exploration_loss_coeff) pushes against."""

    entropy = "entropy"  # maximize the action distribution's entropy
    symmetric_kl = "symmetric_kl"  # minimize the symmetric KL to a uniform prior (discrete actions only)


class SweepObjective(Choice):
    """What train.py's task returns to a Hydra sweeper (e.g. hydra/sweeper=optuna, which maximizes it):
    sf_hydra.app.objective.sweep_score."""

    avg_return = "avg_return"  # the run's final average return
    # minus the training seconds until the run stopped at train_until_avg_return; a run that did not
    # reach it scores below every run that did (sweep_score)
    time_to_target = "time_to_target"


class OptimizerType(Choice):
    """Sample Factory's `--optimizer`: the class algo.optimizer's default `_target_` names
    (OPTIMIZER_TARGETS)."""

    adam = "adam"
    lamb = "lamb"


# The dotted path each OptimizerType names (strings: sf_hydra.config imports nothing above it).
OPTIMIZER_TARGETS = {"adam": "torch.optim.Adam", "lamb": "sf_hydra.learner.lamb.Lamb"}


def optimizer_target(name: str) -> str:
    """The `sf_optimizer` resolver: algo.optimizer_type -> the optimizer class's dotted path."""
    return OPTIMIZER_TARGETS[str(name)]


# The hyperparameters each trained policy holds for itself (algo.* keys of the same names are
# the starting values) and population-based training perturbs; gamma only with pbt.optimize_gamma, Adam's
# (adam_beta1, adam_beta2, adam_eps) only with pbt.optimize_adam.
PBT_HYPERPARAMS = ("learning_rate", "exploration_loss_coeff", "value_loss_coeff", "max_grad_norm", "ppo_clip_ratio",
                   "ppo_clip_value", "adam_beta1", "adam_beta2", "adam_eps", "gamma")
