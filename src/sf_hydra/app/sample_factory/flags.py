"""Every Sample Factory 2.x flag and what it is here: the one table (`FLAGS`).

A row is one of three kinds:

- MAPPED: our dotted config key (`key`), with a converter where the values differ
  (`--device=gpu` -> `hardware.device=cuda`). `env` and `algo` are config groups
  (`--env=doom_basic` -> `env=doom/basic`).
- REPLACED: another mechanism does the job (`--log_to_file` -> Hydra's job log file in the
  run folder); `key` says which. Values that ask for nothing beyond it (`inert`) are
  dropped; any other value is refused, saying what to use instead.
- NA: not applicable here, `note` says why; values dropped as for REPLACED.

Used by the command-line translation (`python train.py --env=doom_basic ...`), the import of
a Sample Factory run's config.json (`python -m sf_hydra.app.import_sf_config`) and the
generated docs/parameters.md.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from sf_hydra.app.sample_factory.env_names import to_config, to_sf
from sf_hydra.core.errors import ConfigError
from sf_hydra.envs.doom.schema import DOOM_TICRATE

MAPPED, REPLACED, NA = "mapped", "replaced", "n/a"
GROUPS = ("env", "algo")  # keys that are config groups: `env=doom/basic`, not `env.x=...`
ANY = object()  # `inert=ANY`: every value is dropped

def flag_error(name: str, value, allowed: str) -> ConfigError:
    """A ConfigError that names the flag as it is written: `--num_workers=x is not allowed: ...`."""
    error = ConfigError(f"--{name}", value, allowed)
    error.args = (f"--{name}{'' if value is None else f'={value}'} is not allowed: {allowed}",)
    return error


def _identity(value):
    return value


@dataclass(frozen=True)
class Flag:
    name: str  # Sample Factory's flag, without the dashes
    sf_default: Any  # its default, as Sample Factory's config.json holds it
    kind: str
    key: str = ""  # MAPPED: our key; REPLACED: what replaces it
    type: str = "str"  # how a value is read: bool, int, float, str, ints, strs; `?`: None allowed
    note: str = ""  # why (REPLACED, NA), or what the converter does (MAPPED)
    to_ours: Callable[[Any], Any] = _identity  # Sample Factory value -> ours (a dict: several keys)
    to_sf: Callable[[Any], Any] = _identity  # ours -> Sample Factory's (round trip)
    inert: Any = ()  # REPLACED, NA: values that need nothing here (ANY: all)
    family: str = ""  # the key exists in this env family only
    joint: str = ""  # set with other flags (a JOINTS entry): converted together, by `ours_joint`
    stage: str = "train"  # train: a training flag (train.py); enjoy: an evaluation flag (enjoy.py)


# --- value readers: Sample Factory's argparse semantics -------------------------------------

TRUE, FALSE = ("true", "t", "yes", "y", "1"), ("false", "f", "no", "n", "0")


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in TRUE or low in FALSE:
        return low in TRUE
    raise ValueError(f"a boolean ({'/'.join(('True', 'False'))})")


def _list(raw) -> List[str]:
    if isinstance(raw, (list, tuple)):
        items = [str(r) for r in raw]
    else:
        items = [str(raw)]
    out = []
    for item in items:
        out += [p for p in item.strip().strip("[]").replace(",", " ").split() if p]
    return [p.strip("'\"") for p in out]


SCALARS: Dict[str, Callable[[str], Any]] = {"bool": _bool, "int": int, "float": float, "str": str}
SWITCH = "switch"  # argparse's store_true: `--save_video` alone means True (`--save_video=False` is read too)


def parse(flag: Flag, raw) -> Any:
    """A value of `flag` from the command line (a string, or strings for a list flag) or from
    a config.json (already typed). Raises ConfigError naming the flag."""
    kind = "bool" if flag.type == SWITCH else flag.type.rstrip("?")
    try:
        if flag.type.endswith("?") and (raw is None or raw == "None"):
            return None
        if kind in ("ints", "strs"):
            items = raw if isinstance(raw, list) and all(not isinstance(r, str) for r in raw) else _list(raw)
            return [int(i) if kind == "ints" else str(i) for i in items]
        if isinstance(raw, (list, tuple)):
            if len(raw) != 1:
                raise ValueError("one value")
            raw = raw[0]
        if not isinstance(raw, str):
            if kind == "bool" and not isinstance(raw, bool):
                raise ValueError("a boolean")
            if kind == "int" and (isinstance(raw, bool) or float(raw) != int(raw)):
                raise ValueError("an integer")
            return {"int": int, "float": float, "str": str, "bool": bool}[kind](raw)
        if kind == "int" and "e" in raw.lower():
            return int(float(raw))  # 1e10: Sample Factory's defaults are written so
        return SCALARS[kind](raw)
    except (TypeError, ValueError) as e:
        wanted = str(e) if str(e).startswith(("a ", "one ")) else f"a value of type {flag.type}"
        raise flag_error(flag.name, raw, wanted) from None


# --- converters -----------------------------------------------------------------------------

def _choice(mapping: Dict[str, str], flag: str):
    """A converter for values with other names here, and its inverse."""
    back = {v: k for k, v in mapping.items()}

    def to_ours(value):
        if value not in mapping:
            raise flag_error(flag, value, f"one of {list(mapping)}")
        return mapping[value]

    return to_ours, lambda value: back[str(value)]


_device = _choice({"gpu": "cuda", "cpu": "cpu"}, "device")
# Sample Factory initializes its action head with policy_init_gain too; ours has a key of its own.
_init_gain = (lambda gain: {"model.policy_init_gain": gain, "model.action_head_init_gain": gain}, _identity)
_algo = _choice({"APPO": "appo"}, "algo")  # Sample Factory has one algorithm; algo=ppo is ours
_algo_or_sampler = (lambda name: _v1_algo(name), _algo[1])


def _env_to_ours(conf_dir: str):
    return lambda name: to_config(str(name), conf_dir)


def _env_to_sf(conf_dir: str):
    return lambda ours: to_sf(ours["env"], ours.get("env.id"), conf_dir)


def _policy_workers(n):
    """SF's policy workers are inference processes: ours are servers (hardware.inference=server) when n > 1."""
    return {"hardware.inference_workers": n, **({"hardware.inference": "server"} if n > 1 else {})}


def _m(name, default, key, type_="str", note="", conv=None, family="", inert=()) -> Flag:
    to_ours, to_sf = conv or (_identity, _identity)
    return Flag(name, default, MAPPED, key, type_, note, to_ours, to_sf, inert, family)


def _r(name, default, by, note, type_="str", inert=()) -> Flag:
    return Flag(name, default, REPLACED, by, type_, note, inert=inert)


def _na(name, default, note, type_="str", inert=ANY) -> Flag:
    return Flag(name, default, NA, "", type_, note, inert=inert)


BELOW_ONE_NOTE = ("not for gamma and Adam's betas: their distance to 1 is multiplied or divided by a factor in "
                  "[1.01, 1.2], as Sample Factory does for gamma and adam_beta1, so they stay below 1")
GPU_ACTING = "hardware.inference=server hardware.inference_device=cuda (the servers act on the GPU; envs stay on CPUs)"
STALL = "hardware.worker_stall_timeout_sec"
_B, _I, _F, _S = "bool", "int", "float", "str"

# The table. Order: Sample Factory's --help order.
FLAGS: Tuple[Flag, ...] = (
    _r("help", False, "`--help [prefix]`", "prints our groups and keys with their meanings", _B, inert=ANY),
    _m("algo", "APPO", "algo", _S, "APPO -> algo=appo (algo=ppo: synchronous PPO, ours); 1.x's DUMMY_SAMPLER -> "
       "benchmark=true", _algo_or_sampler),
    _m("env", None, "env", "str?", "a Sample Factory env name -> env=<family>/<name> (list below)"),
    _m("experiment", "default_experiment", "experiment"),
    _m("train_dir", "./train_dir", "train_dir",
       note="a path; an imported config.json's is the other machine's: not imported"),
    _m("restart_behavior", "resume", "restart_behavior"),
    _m("device", "gpu", "hardware.device", _S, "gpu -> cuda", _device),
    _m("seed", None, "seed", "int?"),
    _m("num_policies", 1, "algo.num_policies", _I,
       note="which policy acts in each single-agent env is ours to choose: algo.policy_assignment (fixed blocks of "
            "envs by default where they divide evenly; Sample Factory re-draws an env's policy every 10 episodes, "
            "see below)"),
    _m("async_rl", True, "algo.async_rl", _B),
    _m("serial_mode", False, "hardware.serial_mode", _B),
    _m("batched_sampling", False, "hardware.batched_sampling", _B),
    _m("num_batches_to_accumulate", 2, "algo.num_batches_to_accumulate", _I),
    _m("worker_num_splits", 2, "hardware.worker_num_splits", _I),
    _m("policy_workers_per_policy", 1, "hardware.inference_workers", _I, "n > 1 -> hardware.inference=server "
       "hardware.inference_workers=n (each server holds every policy); 1 keeps our default, a policy copy in each "
       "rollout worker (faster on few cores)", (_policy_workers, _identity)),
    _m("max_policy_lag", 1000, "algo.max_policy_lag", _I),
    _m("num_workers", 4, "hardware.num_workers", _I),
    _m("num_envs_per_worker", 2, "hardware.num_envs_per_worker", _I),
    _m("batch_size", 1024, "algo.batch_size", _I),
    _m("num_batches_per_epoch", 1, "algo.num_batches_per_epoch", _I),
    _m("num_epochs", 1, "algo.num_epochs", _I),
    _m("rollout", 32, "algo.rollout", _I),
    _m("recurrence", -1, "algo.recurrence", _I),
    _m("shuffle_minibatches", False, "algo.shuffle_minibatches", _B),
    _m("gamma", 0.99, "algo.gamma", _F),
    _m("reward_scale", 1.0, "env.reward_scale", _F),
    _m("reward_clip", 1000.0, "env.reward_clip", _F),
    _m("value_bootstrap", False, "algo.value_bootstrap", _B),
    _m("normalize_returns", True, "algo.normalize_returns", _B),
    _m("exploration_loss_coeff", 0.003, "algo.exploration_loss_coeff", _F),
    _m("value_loss_coeff", 0.5, "algo.value_loss_coeff", _F),
    _m("kl_loss_coeff", 0.0, "algo.kl_loss_coeff", _F),
    _m("exploration_loss", "entropy", "algo.exploration_loss"),
    _m("gae_lambda", 0.95, "algo.gae_lambda", _F),
    _m("ppo_clip_ratio", 0.1, "algo.ppo_clip_ratio", _F),
    _m("ppo_clip_value", 1.0, "algo.ppo_clip_value", _F),
    _m("with_vtrace", False, "algo.with_vtrace", _B),
    _m("vtrace_rho", 1.0, "algo.vtrace_rho", _F),
    _m("vtrace_c", 1.0, "algo.vtrace_c", _F),
    _m("optimizer", "adam", "algo.optimizer_type"),
    _m("adam_eps", 1e-6, "algo.adam_eps", _F),
    _m("adam_beta1", 0.9, "algo.adam_beta1", _F),
    _m("adam_beta2", 0.999, "algo.adam_beta2", _F),
    _m("max_grad_norm", 4.0, "algo.max_grad_norm", _F),
    _m("learning_rate", 1e-4, "algo.learning_rate", _F),
    _m("lr_schedule", "constant", "algo.lr_schedule"),
    _m("lr_schedule_kl_threshold", 0.008, "algo.lr_schedule_kl_threshold", _F),
    _m("lr_adaptive_min", 1e-6, "algo.lr_adaptive_min", _F),
    _m("lr_adaptive_max", 0.01, "algo.lr_adaptive_max", _F),
    _m("obs_subtract_mean", 0.0, "env.obs_subtract_mean", _F),
    _m("obs_scale", 1.0, "env.obs_scale", _F),
    _m("normalize_input", True, "algo.normalize_input", _B),
    _m("normalize_input_keys", None, "algo.normalize_input_keys", "strs?"),
    _m("decorrelate_experience_max_seconds", 0, "hardware.decorrelate_experience_max_seconds", _I),
    _m("decorrelate_envs_on_one_worker", True, "hardware.decorrelate_envs_on_one_worker", _B),
    _r("actor_worker_gpus", [], GPU_ACTING, "rollout workers use CPUs", "ints", inert=([],)),
    _m("set_workers_cpu_affinity", True, "hardware.set_workers_cpu_affinity", _B),
    _m("force_envs_single_thread", False, "hardware.force_envs_single_thread", _B),
    _r("default_niceness", 0, "hardware.worker_nice",
       "the learner keeps the nice level it is started with (`nice -n N python train.py`); rollout "
       "workers run hardware.worker_nice levels lower", _I, inert=(0,)),
    _r("log_to_file", True, "Hydra's job log, <run_dir>/train.log",
       "always written (hydra.job_logging configures it)", _B, inert=(True,)),
    _m("experiment_summaries_interval", 10, "logger.experiment_summaries_interval", _F),
    _m("flush_summaries_interval", 30, "logger.flush_summaries_interval", _F),
    _m("stats_avg", 100, "logger.stats_avg", _I),
    _m("summaries_use_frameskip", True, "logger.summaries_use_frameskip", _B),
    _r("heartbeat_interval", 20, STALL,
       "no heartbeat messages: the runner watches each worker's progress itself", _F, inert=ANY),
    _m("heartbeat_reporting_interval", 180, STALL, _F, "SF names a component silent for longer (and stops the run "
       "when all of a kind are); ours names a worker without progress for longer, restarts its env or stops the run"),
    _m("train_for_env_steps", 10_000_000_000, "train_for_env_steps", _I),
    _m("train_for_seconds", 10_000_000_000, "train_for_seconds", _F),
    _m("save_every_sec", 120, "save_every_sec", _F),
    _m("keep_checkpoints", 2, "keep_checkpoints", _I),
    _m("load_checkpoint_kind", "latest", "load_checkpoint_kind"),
    _m("save_milestones_sec", -1, "save_milestones_sec", _F),
    _m("save_best_every_sec", 5, "save_best_every_sec", _F),
    _m("save_best_metric", "reward", "save_best_metric"),
    _m("save_best_after", 100_000, "save_best_after", _I),
    _m("benchmark", False, "benchmark", _B),
    _m("encoder_mlp_layers", [512, 512], "model.encoder_mlp_layers", "ints"),
    _m("encoder_conv_architecture", "convnet_simple", "model.encoder_conv_architecture"),
    _m("encoder_conv_mlp_layers", [512], "model.encoder_conv_mlp_layers", "ints"),
    _m("use_rnn", True, "model.use_rnn", _B),
    _m("rnn_size", 512, "model.rnn_size", _I),
    _m("rnn_type", "gru", "model.rnn_type"),
    _m("rnn_num_layers", 1, "model.rnn_num_layers", _I),
    _m("decoder_mlp_layers", [], "model.decoder_mlp_layers", "ints"),
    _m("nonlinearity", "elu", "model.nonlinearity"),
    _m("policy_initialization", "orthogonal", "model.policy_initialization"),
    _m("policy_init_gain", 1.0, "model.policy_init_gain", _F, "also sets model.action_head_init_gain, as SF's "
       "head takes this gain", _init_gain),
    _m("actor_critic_share_weights", True, "model.actor_critic_share_weights", _B),
    _m("adaptive_stddev", True, "model.adaptive_stddev", _B),
    _m("continuous_tanh_scale", 0.0, "model.continuous_tanh_scale", _F),
    _m("initial_stddev", 1.0, "model.initial_stddev", _F),
    _m("use_env_info_cache", False, "hardware.use_env_info_cache", _B),
    _r("env_gpu_actions", False, GPU_ACTING, "actions reach envs as CPU arrays", _B, inert=(False,)),
    _r("env_gpu_observations", True, GPU_ACTING, "without actor_worker_gpus it changes nothing", _B,
       inert=(True, False)),
    _m("env_frameskip", 1, "env.frameskip", _I),
    _m("env_framestack", 1, "env.frame_stack", _I, "the atari family stacks frames; elsewhere 1 only",
       family="atari", inert=(1,)),
    _m("pixel_format", "CHW", "env.pixel_format"),
    _na("use_record_episode_statistics", False,
        "every episode's return and length are always recorded (sf_hydra.core.metric_names)", _B),
    _m("episode_counter", False, "env.episode_counter", _B),
    _m("with_wandb", False, "logger.with_wandb", _B),
    _m("wandb_user", None, "logger.wandb_user", "str?"),
    _m("wandb_project", "sample_factory", "logger.wandb_project"),
    _m("wandb_group", None, "logger.wandb_group", "str?"),
    _m("wandb_job_type", "SF", "logger.wandb_job_type"),
    _m("wandb_tags", [], "logger.wandb_tags", "strs"),
    _r("wandb_dir", "./wandb", "<run_dir>/wandb", "W&B's files live in the run's folder", _S, inert=ANY),
    _m("with_pbt", False, "pbt.with_pbt", _B,
       note="as in Sample Factory: policy 0 is the reference, never perturbed, though it may be replaced; policies "
            "1..N-1 are perturbed once at the start; Adam's values are perturbed only with pbt.optimize_adam, ours, "
            "off by default as SF tunes none; unlike SF, a policy without an objective yet is left out of the "
            "ranking instead of holding every look up"),
    _m("pbt_mix_policies_in_one_env", True, "pbt.mix_policies_in_one_env", _B),
    _m("pbt_period_env_steps", 5_000_000, "pbt.period_env_steps", _I),
    _m("pbt_start_mutation", 20_000_000, "pbt.start_mutation", _I),
    _m("pbt_replace_fraction", 0.3, "pbt.replace_fraction", _F),
    _m("pbt_mutation_rate", 0.15, "pbt.mutation_rate", _F,
       note="as in Sample Factory, a chosen value that differs from its default goes back to it with 1% chance"),
    _m("pbt_replace_reward_gap", 0.1, "pbt.replace_reward_gap", _F),
    _m("pbt_replace_reward_gap_absolute", 1e-6, "pbt.replace_reward_gap_absolute", _F),
    _m("pbt_optimize_gamma", False, "pbt.optimize_gamma", _B),
    _m("pbt_target_objective", "true_objective", "pbt.target_objective"),
    _m("pbt_perturb_min", 1.1, "pbt.perturb_min", _F, note=BELOW_ONE_NOTE),
    _m("pbt_perturb_max", 1.5, "pbt.perturb_max", _F, note=BELOW_ONE_NOTE),
)


# --- Sample Factory's Doom flags (sf_examples.vizdoom's parser), and the evaluation flags its Doom
# parser gives defaults, so that every Doom run's config.json holds them. Not in the v2 reference
# (train_gym_env's --help). The env family's flags: refused for another family unless inert.

def _doom_view(values: Dict[str, Any]) -> Dict[str, Any]:
    """SF's view: it renders 160x120 (256x144 with --wide_aspect_ratio), then resizes to res_w x res_h
    by nearest neighbour where that differs; ours renders env.resolution, pools by env.downsample, then
    resizes to env.resize."""
    rendered = "256x144" if values["wide_aspect_ratio"] else "160x120"
    size = [values["res_w"], values["res_h"]]
    resize = None if f"{size[0]}x{size[1]}" == rendered else size
    return {"env.resolution": rendered, "env.downsample": 1, "env.resize": resize}


def _positive_or_drop(key: str):
    """-1 (SF: the scenario's own number) asks for nothing; n > 0 sets `key`."""
    return (lambda n: {key: n} if n > 0 else {}), _identity


def _timelimit_to_ours(minutes):
    if minutes is None:
        return {}
    if minutes <= 0:
        raise flag_error("timelimit", minutes, "minutes > 0 (or None: the scenario's own)")
    return {"env.episode_timeout": round(minutes * 60 * DOOM_TICRATE)}


VIEW = "the three set together: env.resolution=160x120 (256x144 if wide), env.downsample=1, env.resize=[res_w,res_h]"
ENJOY = "python enjoy.py"
DOOM_FLAGS: Tuple[Flag, ...] = (
    _m("num_agents", -1, "env.num_agents", _I, "-1: the scenario's own",
       _positive_or_drop("env.num_agents"), family="doom", inert=(-1,)),
    _na("num_humans", 0, "humans do not join games here: the players are our agents and built-in bots", _I,
        inert=(0,)),
    _m("num_bots", -1, "env.num_bots", _I, "-1: the scenario's own", _positive_or_drop("env.num_bots"),
       family="doom", inert=(-1,)),
    _na("start_bot_difficulty", None, "Sample Factory 2.x reads it nowhere (its bot difficulty wrapper is "
        "disabled); bots play at the engine's skill", "int?"),
    _m("timelimit", None, "env.episode_timeout", "float?", "minutes -> tics (x 60 x 35); SF applies it to "
       "multiplayer matches only, ours cuts any episode; None: the scenario's own",
       (_timelimit_to_ours, lambda tics: tics / (60 * DOOM_TICRATE)), family="doom", inert=(None,)),
    Flag("res_w", 128, MAPPED, "env.resize", _I, VIEW, family="doom", inert=(128,), joint="doom_view"),
    Flag("res_h", 72, MAPPED, "env.resize", _I, VIEW, family="doom", inert=(72,), joint="doom_view"),
    Flag("wide_aspect_ratio", False, MAPPED, "env.resolution", _B, VIEW, family="doom", inert=(False,),
         joint="doom_view"),
    replace(_r("record_to", None, f"{ENJOY} video=true", "episodes saved as videos in <run_dir>/enjoy", "str?",
               inert=(None,)), stage="enjoy"),
)

# --- Sample Factory's evaluation flags (its enjoy scripts): `python enjoy.py --experiment=x --save_video`.
# Its Doom parser gives fps and eval_env_frameskip defaults (35, 1), so a Doom run's config.json holds them.

def _unlimited_or(key: str):
    """Sample Factory's 1e9 (no limit) asks for nothing; a smaller number sets `key`."""
    return (lambda n: {key: n} if n < 1_000_000_000 else {}), _identity


EVAL_FLAGS: Tuple[Flag, ...] = (
    _r("fps", 0, "the env's own rate", "enjoy.py's videos play at it (Doom: 35 / frameskip)", _I, inert=ANY),
    _r("eval_env_frameskip", None, "the run's env.frameskip", "enjoy.py plays with it", "int?", inert=ANY),
    _na("no_render", False, "enjoy.py opens no window unless render=true", SWITCH),
    _m("save_video", False, "video", SWITCH),
    _m("video_frames", 1_000_000_000, "video_frames", _I, "1e9 -> None", _unlimited_or("video_frames")),
    _r("video_name", None, "<run_dir>/enjoy/episode_NNN.<video_format>", "one video per episode, named so",
       "str?", inert=(None,)),
    _na("max_num_frames", 1_000_000_000, "enjoy.py plays whole episodes: episodes=N, max_episode_steps=N cut "
        "them", _I, inert=(1_000_000_000,)),
    _m("max_num_episodes", 1_000_000_000, "episodes", _I, "1e9 (play until stopped) is dropped: ours plays "
       "`episodes`", _unlimited_or("episodes")),
    _m("push_to_hub", False, "push_to_hub", SWITCH),
    _m("hf_repository", None, "hf_repository", "str?"),
    _m("policy_index", 0, "policy", _I),
    _m("eval_deterministic", False, "deterministic", _B),
    _na("train_script", None, "for Hugging Face Hub model cards, not uploaded here", "str?", inert=(None,)),
    _na("enjoy_script", None, "for Hugging Face Hub model cards, not uploaded here", "str?", inert=(None,)),
)
EVAL_FLAGS = tuple(replace(row, stage="enjoy") for row in EVAL_FLAGS)  # their stage, declared once
# Training flags enjoy.py reads (to find and play the run): Sample Factory's key -> enjoy's. The others are
# dropped there: the run's saved config holds them.
ENJOY_KEYS = {"experiment": "experiment", "train_dir": "train_dir", "load_checkpoint_kind": "load_checkpoint_kind",
              "seed": "seed"}

# --- Sample Factory 1.x flags (the paper's and its README's command lines: `python -m
# sample_factory.algorithms.appo.train_appo ...`) that 2.x renamed or dropped. A 1.x flag whose name 2.x kept
# reads through the 2.x row above (same meaning); these are the others, with 1.x's defaults.

def _v1_encoder_subtype(subtype):
    """1.x's encoder design: a conv stack of ours by the same name, or mlp_mujoco's two layers of 64."""
    if subtype in ("convnet_simple", "convnet_impala", "convnet_atari", "resnet_impala"):
        return {"model.encoder_conv_architecture": subtype}
    if subtype == "mlp_mujoco":
        return {"model.encoder_mlp_layers": [64, 64]}
    raise flag_error("encoder_subtype", subtype, "one of convnet_simple, convnet_impala, convnet_atari, "
                     "resnet_impala (model.encoder_conv_architecture) or mlp_mujoco (model.encoder_mlp_layers=[64,64])")


def _v1_hidden(values: Dict[str, Any]) -> Dict[str, Any]:
    """1.x's hidden_size is the RNN's size and the size of each of encoder_extra_fc_layers after the conv stack."""
    size, layers = values["hidden_size"], values["encoder_extra_fc_layers"]
    return {"model.rnn_size": size, "model.encoder_conv_mlp_layers": [size] * layers}


def _v1_accumulate(n):
    """-1 (1.x: 2 x num_batches_per_iteration) is our default (2); n >= 0 sets it."""
    return {} if n == -1 else {"algo.num_batches_to_accumulate": n}


def _v1_algo(name):
    """APPO; DUMMY_SAMPLER (1.x's run_algorithm: sample, learn nothing) is benchmark=true."""
    if name == "DUMMY_SAMPLER":
        return {"benchmark": True}
    return {"algo": _algo[0](name)}


V1_HIDDEN = ("set together: model.rnn_size=hidden_size, model.encoder_conv_mlp_layers=[hidden_size] x "
             "encoder_extra_fc_layers")
RUNNER = "1.x's runner (python -m sample_factory.runner.run), not a training flag"
NO_DMLAB = ("a DMLab flag: the dmlab family's envs cannot be built here (deepmind_lab is not on PyPI; env=dmlab/... "
            "stops)")
V1_FLAGS: Tuple[Flag, ...] = (
    _m("ppo_epochs", 1, "algo.num_epochs", _I, "2.x: --num_epochs"),
    _m("num_batches_per_iteration", 1, "algo.num_batches_per_epoch", _I, "2.x: --num_batches_per_epoch"),
    _m("num_minibatches_to_accumulate", -1, "algo.num_batches_to_accumulate", _I,
       "2.x: --num_batches_to_accumulate; -1 (2 x num_batches_per_iteration) is our default",
       (_v1_accumulate, _identity)),
    Flag("hidden_size", 512, MAPPED, "model.rnn_size", _I, V1_HIDDEN, joint="v1_hidden"),
    Flag("encoder_extra_fc_layers", 1, MAPPED, "model.encoder_conv_mlp_layers", _I, V1_HIDDEN, joint="v1_hidden"),
    _r("encoder_type", "conv", "model.encoder", "the default encoder picks a conv stack for image observations and "
       "an MLP otherwise; encoder_subtype names the stack", _S, inert=ANY),
    _m("encoder_subtype", "convnet_simple", "model.encoder_conv_architecture", _S,
       "2.x: --encoder_conv_architecture; mlp_mujoco -> model.encoder_mlp_layers=[64,64]",
       (_v1_encoder_subtype, _identity)),
    _na("encoder_custom", None, "an encoder of your own is model.encoder._target_ (a dotted path); 1.x's "
        "dmlab_instructions needs DMLab, which is not available here", "str?", inert=(None,)),
    _na("use_spectral_norm", False, "no spectral normalization here", _B, inert=(False,)),
    _r("reset_timeout_seconds", 120, STALL, "a worker whose env reset or step makes no progress for longer is "
       "named (and its env restarted, hardware.max_env_restarts)", _I, inert=ANY),
    _na("train_in_background_thread", True, "the learner trains in the main process, between batches", _B,
        inert=ANY),
    _m("learner_main_loop_num_cores", 1, "hardware.torch_threads", _I),
    _na("traj_buffers_excess_ratio", 1.3, "trajectory slots are counted from workers x envs x splits", _F,
        inert=ANY),
    _na("pbt_optimize_batch_size", False, "the batch size is not a PBT hyperparameter here", _B, inert=(False,)),
    _na("use_cpc", False, "no CPC|A auxiliary loss here", _B, inert=(False,)),
    _na("cpc_forward_steps", 8, "no CPC|A auxiliary loss here", _I),
    _na("cpc_time_subsample", 6, "no CPC|A auxiliary loss here", _I),
    _na("cpc_forward_subsample", 2, "no CPC|A auxiliary loss here", _I),
    _m("sampler_only", False, "benchmark", _B, "2.x: --benchmark"),
    _m("sample_env_frames", 1_000_000_000, "train_for_env_steps", _I,
       "1.x's run_algorithm (--algo=DUMMY_SAMPLER, i.e. benchmark=true): frames to sample"),
    _r("runner", "processes", "hydra/launcher=local_parallel|slurm", f"{RUNNER}: processes -> local_parallel, "
       "slurm -> slurm, with --multirun"),
    _r("max_parallel", 4, "hydra.launcher.max_parallel", f"{RUNNER}: with --multirun hydra/launcher=local_parallel",
       _I),
    _na("pause_between", 10, f"{RUNNER}: local_parallel starts its runs together, each pinned to its cores", _I),
    _r("experiments_per_gpu", -1, "hydra.launcher.experiments_per_gpu", f"{RUNNER}: with --multirun "
       "hydra/launcher=local_parallel", _I),
    _r("num_gpus", 1, "hydra.launcher.num_gpus", f"{RUNNER}: with --multirun hydra/launcher=local_parallel", _I),
    _na("dmlab_renderer", "software", NO_DMLAB, inert=("software",)),
    _na("dmlab_extended_action_set", False, NO_DMLAB, _B, inert=(False,)),
    _na("dmlab_one_task_per_worker", False, NO_DMLAB, _B, inert=(False,)),
    _na("dmlab30_dataset", "~/datasets/brady_konkle_oliva2008", NO_DMLAB,
        inert=("~/datasets/brady_konkle_oliva2008",)),
    _na("dmlab_use_level_cache", False, NO_DMLAB, _B, inert=(False,)),
    _na("dmlab_level_cache_path", "dmlab_cache", NO_DMLAB, inert=("dmlab_cache",)),
)
# {joint name: (its flags, {their SF values} -> {our key: value})}
JOINTS: Dict[str, Tuple[Tuple[str, ...], Callable[[Dict[str, Any]], Dict[str, Any]]]] = {
    "doom_view": (("wide_aspect_ratio", "res_w", "res_h"), _doom_view),
    "v1_hidden": (("hidden_size", "encoder_extra_fc_layers"), _v1_hidden),
}
ENV_FLAGS = DOOM_FLAGS + EVAL_FLAGS + V1_FLAGS  # rows beyond the v2 reference
BY_NAME: Dict[str, Flag] = {f.name: f for f in FLAGS + ENV_FLAGS}
assert len(BY_NAME) == len(FLAGS + ENV_FLAGS), "a flag declared twice"
# config.json keys Sample Factory adds about the run itself (not flags): skipped on import
RUN_RECORD_KEYS = ("command_line", "cli_args", "git_hash", "git_repo_name")


def with_env_converter(flag: Flag, conf_dir: str) -> Flag:
    """`--env` needs the config folder (its names come from conf/env)."""
    if flag.name != "env":
        return flag
    return replace(flag, to_ours=_env_to_ours(conf_dir), to_sf=_env_to_sf(conf_dir))


def flag(name: str, conf_dir: Optional[str] = None, value=None) -> Flag:
    """The row of `--name`; ConfigError (with close names) if Sample Factory has no such flag."""
    if name not in BY_NAME:
        close = difflib.get_close_matches(name, list(BY_NAME), n=5, cutoff=0.6)
        hint = f"close matches: {['--' + c for c in close]}" if close else "no close match"
        raise flag_error(name, value, f"not a Sample Factory flag nor one of Hydra's ({hint}; "
                         "the list: docs/parameters.md)")
    row = BY_NAME[name]
    return with_env_converter(row, conf_dir) if conf_dir else row


def _inert(row: Flag, value) -> bool:
    return row.inert is ANY or value in list(row.inert)


def ours(row: Flag, value, family: str = "", stage: str = "train") -> Dict[str, Any]:
    """{our key: value} for a parsed Sample Factory value ({} when it asks for nothing here).
    `family`: the env family the run uses (for keys only one family has); `stage`: train (train.py,
    an imported config.json) or enjoy (enjoy.py). Raises ConfigError, naming the flag, for a value
    that cannot be honoured."""
    if stage == "enjoy" and row.stage == "train":
        return {ENJOY_KEYS[row.name]: value} if row.name in ENJOY_KEYS else {}
    if stage == "train" and row.stage == "enjoy" and row.kind == MAPPED:
        if value == row.sf_default:
            return {}
        raise flag_error(row.name, value, f"an evaluation flag: python enjoy.py --{row.name}=...")
    if row.kind != MAPPED:
        if _inert(row, value):
            return {}
        what = f"replaced by {row.key}: {row.note}" if row.kind == REPLACED else f"not applicable: {row.note}"
        raise flag_error(row.name, value, what)
    if row.family and family != row.family:
        if _inert(row, value):
            return {}
        raise flag_error(row.name, value, f"a flag of the {row.family} env family (this run's: {family or '?'}); "
                         f"{row.note}")
    if row.joint:
        raise ValueError(f"--{row.name} is set with other flags: ours_joint")
    converted = row.to_ours(value)
    return dict(converted) if isinstance(converted, dict) else {row.key: converted}


def ours_joint(joint: str, given: Dict[str, Any], family: str = "") -> Dict[str, Any]:
    """{our key: value} for the flags of a JOINTS entry that a command line or config.json gives
    ({flag: parsed value}); the entry's other flags take Sample Factory's defaults."""
    names, convert = JOINTS[joint]
    rows = [BY_NAME[n] for n in names]
    if rows[0].family and family != rows[0].family:
        for name, value in given.items():
            if not _inert(BY_NAME[name], value):
                raise flag_error(name, value, f"a flag of the {rows[0].family} env family (this run's: "
                                 f"{family or '?'})")
        return {}
    return convert({row.name: given.get(row.name, row.sf_default) for row in rows})


def from_ours(row: Flag, values: Dict[str, Any]):
    """Sample Factory's value for our {key: value} (the inverse of `ours`)."""
    return row.to_sf(values if row.name == "env" else values[row.key])


def literal(text: str):
    """A config.json-like Python value of a default as Sample Factory's --help prints it."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def counts(flags: Sequence[Flag] = FLAGS) -> Dict[str, int]:
    out = {MAPPED: 0, REPLACED: 0, NA: 0}
    for row in flags:
        out[row.kind] += 1
    return out

