"""Rules that relate several keys, or need more than a type to check. They run on the
composed config before any process starts, and each names the key, the value and what
is allowed. A key with a fixed set of values is typed with its Enum (config/choices.py):
Hydra refuses a value outside the set when it composes, before these rules run."""

from __future__ import annotations

import copy
import math

from omegaconf import DictConfig, OmegaConf

from sf_hydra.config.assignment import check_policy_assignment
from sf_hydra.config.choices import OPTIMIZER_TARGETS, PBT_HYPERPARAMS
from sf_hydra.config.metrics import check_metric
from sf_hydra.config.schema import HardwareConfig as HardwareDefaults
from sf_hydra.config.schema import TrainConfig as TrainDefaults
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.metric_names import EVAL_ON, eval_on, is_eval_metric

AT_LEAST_ONE = (
    "hardware.num_workers", "hardware.num_envs_per_worker", "hardware.worker_num_splits", "hardware.torch_threads",
    "algo.rollout", "algo.batch_size", "algo.num_batches_per_epoch", "algo.num_epochs",
    "algo.num_batches_to_accumulate", "algo.max_policy_lag", "keep_checkpoints", "train_for_env_steps",
    "env.frameskip", "logger.stats_avg", "model.rnn_size", "model.rnn_num_layers", "algo.num_policies",
    "selfplay.snapshot_every_env_steps", "algo.nonfinite_updates_limit", "hardware.devices", "hardware.num_nodes",
)

POSITIVE = (
    "algo.learning_rate", "algo.ppo_clip_ratio", "algo.ppo_clip_value", "algo.adam_eps", "train_for_seconds",
    "save_every_sec", "env.obs_scale", "env.reward_clip", "hardware.worker_start_timeout_sec",
    "hardware.worker_stall_timeout_sec", "logger.log_interval_sec", "logger.experiment_summaries_interval",
    "save_best_every_sec", "logger.flush_summaries_interval", "hardware.ddp_timeout_sec",
    "model.initial_stddev",  # its log is taken (learned-vector std); <= 0 fails deep inside model construction
    "algo.vtrace_rho", "algo.vtrace_c",  # truncation levels of importance weights (<= 0 would zero every trace)
    "model.policy_init_gain",  # 0 would zero every weight: no gradient reaches the lower layers
)

NON_NEGATIVE = (
    "algo.max_grad_norm", "algo.value_loss_coeff", "algo.exploration_loss_coeff", "model.continuous_tanh_scale",
    "algo.kl_loss_coeff", "hardware.decorrelate_experience_max_seconds",
    "model.action_head_init_gain",  # 0: zero logits, exactly uniform actions at the start
)

# Numbers that enter the loss or the weights as factors: inf passes the ranges above and makes every
# loss, gradient or weight non-finite at the first update (inf elsewhere, as a clip level, means "none").
FINITE = (
    "algo.learning_rate", "algo.adam_eps", "algo.value_loss_coeff", "algo.exploration_loss_coeff",
    "algo.kl_loss_coeff", "model.policy_init_gain", "model.action_head_init_gain", "model.initial_stddev",
    "model.continuous_tanh_scale", "env.obs_scale",
)

# Layer sizes of the MLPs: 0 builds a layer with no outputs (the heads then read nothing, silently),
# a negative size fails inside torch without naming the key.
LAYER_SIZES = ("model.encoder_mlp_layers", "model.encoder_conv_mlp_layers", "model.decoder_mlp_layers")

UNIT_INTERVAL = ("algo.gamma", "algo.gae_lambda", "selfplay.latest_prob")

# torch.optim.Adam rejects beta = 1 (only when the learner builds its optimizer, too late).
HALF_OPEN_UNIT_INTERVAL = ("algo.adam_beta1", "algo.adam_beta2")


def _get(cfg, key: str):
    node = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node


def _check_ranges(cfg) -> None:
    # Written as `not value >= bound` so that NaN (a valid float override: `key=nan`) fails too.
    for key in AT_LEAST_ONE:
        if not _get(cfg, key) >= 1:
            raise ConfigError(key, _get(cfg, key), "an integer >= 1")
    for key in POSITIVE:
        if not _get(cfg, key) > 0:
            raise ConfigError(key, _get(cfg, key), "a number > 0")
    for key in NON_NEGATIVE:
        if not _get(cfg, key) >= 0:
            raise ConfigError(key, _get(cfg, key), "a number >= 0")
    for key in FINITE:
        if not math.isfinite(_get(cfg, key)):
            raise ConfigError(key, _get(cfg, key), "a finite number")
    for key in LAYER_SIZES:
        sizes = list(_get(cfg, key))
        if not all(size >= 1 for size in sizes):
            raise ConfigError(key, sizes, "a list of layer sizes, each an integer >= 1 ([] for no layers)")
    for key in UNIT_INTERVAL:
        if not 0.0 <= _get(cfg, key) <= 1.0:
            raise ConfigError(key, _get(cfg, key), "a number in [0, 1]")
    for key in HALF_OPEN_UNIT_INTERVAL:
        if not 0.0 <= _get(cfg, key) < 1.0:
            raise ConfigError(key, _get(cfg, key), "a number in [0, 1)")
    if cfg.model.tanh_squash_actions and cfg.model.continuous_tanh_scale > 0:
        raise ConfigError("model.continuous_tanh_scale", cfg.model.continuous_tanh_scale,
                          "0 when model.tanh_squash_actions=true (squashed actions are bounded already)")
    if cfg.algo.recurrence != -1 and cfg.algo.recurrence < 1:
        raise ConfigError("algo.recurrence", cfg.algo.recurrence, "-1 (automatic) or an integer >= 1")
    if not cfg.hardware.max_env_restarts >= 0:
        raise ConfigError("hardware.max_env_restarts", cfg.hardware.max_env_restarts,
                          "an integer >= 0 (0: the first crash or hang of an env stops the run)")
    if not cfg.selfplay.pool_size >= 0:
        raise ConfigError("selfplay.pool_size", cfg.selfplay.pool_size, "an integer >= 0 (0: no opponent pool)")
    _check_opponent_sampling(cfg.selfplay)
    if not cfg.experiment or "/" in cfg.experiment or cfg.experiment in (".", ".."):
        raise ConfigError("experiment", cfg.experiment, "a non-empty folder name without '/'")


def _check_opponent_sampling(sp) -> None:
    """Prioritized opponents need a pool to draw from, and a finite exponent > 0 to weigh them."""
    if sp.opponent_sampling != "uniform" and sp.pool_size <= 0:
        raise ConfigError("selfplay.opponent_sampling", sp.opponent_sampling,
                          "uniform while selfplay.pool_size=0 (the odds weigh the pool's snapshots; set "
                          "selfplay.pool_size > 0)")
    if not (0 < sp.pfsp_exponent < math.inf):
        raise ConfigError("selfplay.pfsp_exponent", sp.pfsp_exponent,
                          "a finite number > 0 (the weight of a snapshot beaten with probability p is (1-p)^exponent)")


def _check_checkpoints(cfg) -> None:
    """Best and milestone checkpoints (sf_hydra.learner.checkpointing)."""
    if not cfg.save_best_after >= 0:
        raise ConfigError("save_best_after", cfg.save_best_after, "an integer >= 0 (env steps)")
    if not (cfg.save_milestones_sec == -1 or cfg.save_milestones_sec > 0):
        raise ConfigError("save_milestones_sec", cfg.save_milestones_sec, "-1 (no milestones) or seconds > 0")
    check_metric(cfg, "save_best_metric")


def _check_losses(cfg) -> None:
    """V-trace's truncation levels as the IMPALA paper assumes them, and the optimizer's class
    named once. V-trace applies with num_epochs > 1 and with recurrent models (the learner
    computes its targets once per iteration with the current model, over the same recurrence
    chunks it trains on), so neither is refused."""
    algo = cfg.algo
    if algo.with_vtrace and not algo.vtrace_c <= algo.vtrace_rho:
        raise ConfigError("algo.vtrace_c", algo.vtrace_c,
                          f"a number <= algo.vtrace_rho={algo.vtrace_rho} with algo.with_vtrace=true (V-trace assumes "
                          "rho_bar >= c_bar, IMPALA section 4.1)")
    target = algo.optimizer.get("_target_") if algo.optimizer is not None else None
    chosen = OPTIMIZER_TARGETS[str(algo.optimizer_type)]
    if str(algo.optimizer_type) != "adam" and target != chosen:
        raise ConfigError("algo.optimizer_type", str(algo.optimizer_type),
                          f"adam (the default) when algo.optimizer._target_ names a class of its own ({target}); "
                          f"algo.optimizer_type picks {chosen} only while algo.optimizer._target_ is left at its "
                          "default")
    _check_optimizer_arguments(algo)


# The optimizer node's arguments that algo.* keys give: (argument, its algo keys). The learner sets every policy's
# optimizer groups from its hyperparameters (learner/optimizers.py apply_to_optimizer), so these keys are their one
# source; the node's own value may only repeat them (the default node reads them by interpolation).
OPTIMIZER_ARGUMENTS = (("lr", ("learning_rate",)), ("eps", ("adam_eps",)), ("betas", ("adam_beta1", "adam_beta2")))


def _numbers(value) -> list:
    """`value` as a list of floats (a scalar as one); None when it holds something else."""
    values = list(value) if isinstance(value, (list, tuple)) or OmegaConf.is_list(value) else [value]
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        return None


def _check_optimizer_arguments(algo) -> None:
    """algo.optimizer's lr, eps and betas, where the node has them, equal algo.learning_rate and algo.adam_*:
    the learner sets the optimizer's groups from those keys (each policy's, PBT's included), so a different
    value in the node would be a second source that silently loses."""
    node = algo.optimizer if algo.optimizer is not None else {}
    for argument, keys in OPTIMIZER_ARGUMENTS:
        if argument not in node:
            continue
        value, expected = node[argument], [float(getattr(algo, k)) for k in keys]
        numbers = _numbers(value)
        if numbers == expected:
            continue
        shown = OmegaConf.to_container(value) if OmegaConf.is_list(value) else value
        instead = (" ".join(f"algo.{k}={v:g}" for k, v in zip(keys, numbers))
                   if numbers is not None and len(numbers) == len(keys) else " ".join(f"algo.{k}" for k in keys))
        raise ConfigError(
            f"algo.optimizer.{argument}", shown,
            f"{expected[0] if len(keys) == 1 else expected} or left out ({', '.join('algo.' + k for k in keys)} "
            f"is the one source of the optimizer's {argument}); set {instead} instead")


def _check_input_normalization(cfg) -> None:
    """algo.normalize_input_keys picks keys for normalize_input: listing keys while normalization is off,
    or listing none while it is on, would be a choice that does nothing, so both are refused (null and
    [] agree with it being off; null means every key while it is on)."""
    keys = cfg.algo.normalize_input_keys
    if keys and not cfg.algo.normalize_input:
        raise ConfigError("algo.normalize_input_keys", list(keys),
                          "null or [] while algo.normalize_input=false (the listed keys would not be normalized; "
                          "set algo.normalize_input=true to normalize them)")
    if keys is not None and len(keys) == 0 and cfg.algo.normalize_input:
        raise ConfigError("algo.normalize_input_keys", [],
                          "null (every observation key) or a non-empty list of keys while algo.normalize_input=true "
                          "([] would normalize nothing; set algo.normalize_input=false for that)")


def _check_sampling(cfg) -> None:
    hw, algo = cfg.hardware, cfg.algo
    if hw.num_envs_per_worker % hw.worker_num_splits:
        raise ConfigError(
            "hardware.num_envs_per_worker", hw.num_envs_per_worker,
            f"a multiple of hardware.worker_num_splits={hw.worker_num_splits} "
            "(each split holds the same number of envs; "
            "with 2 splits for double buffering it must be even)",
        )
    recurrence = (algo.rollout if algo.recurrence == -1 and cfg.model.use_rnn
                  else (1 if algo.recurrence == -1 else algo.recurrence))
    if algo.rollout % recurrence:
        raise ConfigError("algo.rollout", algo.rollout, f"a multiple of algo.recurrence={recurrence}")
    if algo.batch_size % recurrence:
        raise ConfigError("algo.batch_size", algo.batch_size,
                          f"a multiple of algo.recurrence={recurrence} (minibatches hold whole recurrence chunks)")
    if not 0 <= hw.worker_nice <= 19:
        raise ConfigError("hardware.worker_nice", hw.worker_nice,
                          "a nice level from 0 (the learner's priority) to 19 (lowest)")
    if hw.decorrelate_experience_max_seconds >= hw.worker_stall_timeout_sec:
        raise ConfigError("hardware.decorrelate_experience_max_seconds", hw.decorrelate_experience_max_seconds,
                          f"less than hardware.worker_stall_timeout_sec={hw.worker_stall_timeout_sec:g} (the learner "
                          "gives up on workers silent that long)")
    micro = hw.learner_micro_batch
    if micro < -1 or (micro > 0 and micro % recurrence):
        raise ConfigError("hardware.learner_micro_batch", micro,
                          f"-1 (auto), 0 (never split) or a positive multiple of algo.recurrence={recurrence}")
    per_iteration = algo.batch_size * algo.num_batches_per_epoch
    if per_iteration % algo.rollout:
        raise ConfigError(
            "algo.batch_size", algo.batch_size,
            f"batch_size x num_batches_per_epoch (= {per_iteration}) "
            f"must be a multiple of algo.rollout={algo.rollout}: "
            "the learner trains on whole trajectories",
        )
    if not algo.async_rl:
        per_round = hw.num_workers * hw.num_envs_per_worker * algo.rollout
        if per_round % per_iteration:
            raise ConfigError(
                "algo.batch_size", algo.batch_size,
                f"with algo.async_rl=false one round of sampling, num_workers x num_envs_per_worker x rollout = "
                f"{hw.num_workers} x {hw.num_envs_per_worker} x {algo.rollout} = {per_round} transitions, must be a "
                f"multiple of batch_size x num_batches_per_epoch = "
                f"{algo.batch_size} x {algo.num_batches_per_epoch} = {per_iteration}",
            )
    _check_policy_mapping(cfg)
    _check_env_wrappers(cfg)
    _check_inference(cfg)
    _check_layout(cfg)
    if hw.device == "cuda":
        import torch  # only for a CUDA device: a config error otherwise never loads torch (~1 s)

        if not torch.cuda.is_available():
            raise ConfigError("hardware.device", hw.device, "'cpu': no CUDA device is visible on this machine")


# The inference server's keys and their defaults (the schema's): they mean nothing with inference=in_worker.
SERVER_KEYS = tuple((key, getattr(HardwareDefaults, key))
                    for key in ("inference_workers", "inference_device", "inference_cuda_graphs"))


def server_keys_set(hw) -> bool:
    """With hardware.layout=auto, a server key set away from its default asks for inference=server (the probe then
    picks among server layouts only): the in_worker rule on those keys waits for the probe's pick."""
    if str(hw.layout) != "auto":
        return False
    return any(str(hw[key]) != str(default) for key, default in SERVER_KEYS)


def _check_layout(cfg) -> None:
    """hardware.layout=auto: a probe of at most 60 s, of one sampler in processes of its own, for one learner."""
    hw = cfg.hardware
    if not 10.0 <= hw.layout_probe_sec <= 60.0:
        raise ConfigError("hardware.layout_probe_sec", hw.layout_probe_sec, "a number of seconds from 10 to 60")
    if str(hw.layout) != "auto":
        return
    manual = "manual with "
    if hw.serial_mode:
        raise ConfigError("hardware.layout", "auto", manual + "hardware.serial_mode=true (one process: no layout of "
                          "worker processes to pick)")
    if hw.devices > 1 or hw.num_nodes > 1:
        raise ConfigError("hardware.layout", "auto", manual + f"hardware.devices={hw.devices} x hardware.num_nodes="
                          f"{hw.num_nodes} learner ranks (the probe measures one learner's sampler; set the layout "
                          "keys, e.g. from a single-rank run's pick in its config.yaml)")


def _check_inference(cfg) -> None:
    """hardware.inference=server: server processes, so not in serial mode; at most one server per
    worker; a CUDA server needs CUDA. The server keys mean nothing with inference=in_worker."""
    hw = cfg.hardware
    server = str(hw.inference) == "server" or server_keys_set(hw)
    if not server:
        for key, default in SERVER_KEYS:
            if str(hw[key]) != str(default):
                raise ConfigError(f"hardware.{key}", hw[key], f"{default} (its default) unless "
                                  "hardware.inference=server: the policy acts inside each rollout worker")
        return
    if hw.serial_mode:
        raise ConfigError("hardware.inference", "server", "in_worker with hardware.serial_mode=true (serial mode "
                          "runs the workers in the learner's process, with no inference processes)")
    if not 1 <= hw.inference_workers <= hw.num_workers:
        raise ConfigError("hardware.inference_workers", hw.inference_workers,
                          f"an integer from 1 to hardware.num_workers={hw.num_workers} (each serves >= 1 worker)")
    if hw.inference_cuda_graphs and hw.inference_device != "cuda":
        raise ConfigError("hardware.inference_cuda_graphs", True, "false unless hardware.inference_device=cuda "
                          "(CUDA graphs replay GPU kernels; a CPU server acts eagerly)")
    if hw.inference_device == "cuda":
        import torch  # only for a CUDA device: a config error otherwise never loads torch (~1 s)

        if not torch.cuda.is_available():
            raise ConfigError("hardware.inference_device", "cuda",
                              "'cpu': no CUDA device is visible on this machine")


def _check_env_wrappers(cfg) -> None:
    """env.episode_counter and env.pixel_format=HWC wrap each env that make_env builds: a vector
    env of the family's own (batched sampling, a backend other than sync) is not built by it,
    and vector envs report no episode statistics."""
    hw, env = cfg.hardware, cfg.env
    if not hw.batched_sampling:
        return
    if env.episode_counter:
        raise ConfigError("env.episode_counter", True, "false with hardware.batched_sampling=true (a vector env "
                          "reports no episode statistics)")
    if str(env.pixel_format) == "HWC" and hw.vector_backend != "sync":
        raise ConfigError("env.pixel_format", "HWC", "CHW with hardware.batched_sampling=true, unless "
                          "hardware.vector_backend=sync (whose envs are wrapped one by one)")


def _check_policy_mapping(cfg) -> None:
    """algo.policy_assignment's rules on the config alone (config/assignment.py). Batched sampling maps whole
    workers to policies (worker i serves policy i mod N): every policy needs a worker, and a vector env has
    no opponent seats."""
    check_policy_assignment(cfg)
    hw, n = cfg.hardware, cfg.algo.num_policies
    if not hw.batched_sampling:
        return
    if n > hw.num_workers:
        raise ConfigError("algo.num_policies", n,
                          f"at most hardware.num_workers={hw.num_workers} with hardware.batched_sampling=true "
                          "(a whole worker serves one policy: worker i -> policy i mod num_policies)")
    if cfg.selfplay.pool_size > 0:
        raise ConfigError("selfplay.pool_size", cfg.selfplay.pool_size,
                          "0 with hardware.batched_sampling=true (a vector env of single-agent envs has no "
                          "opponent seats)")


def _check_pbt(cfg) -> None:
    """Population-based training: a population to rank, groups that do not overlap, factors
    that perturb, hyperparameter names PBT knows."""
    pbt, n = cfg.pbt, cfg.algo.num_policies
    if pbt.workspace and pbt.member < 0:
        raise ConfigError("pbt.member", pbt.member, "this run's member index (an integer >= 0) with pbt.workspace")
    if pbt.with_pbt and pbt.workspace and n != 1:
        raise ConfigError("algo.num_policies", n, "1 with pbt.workspace (each run of the population is one member)")
    if pbt.with_pbt and not pbt.workspace and n < 2:
        raise ConfigError("pbt.with_pbt", True, f"false with algo.num_policies={n}: a population needs "
                          "algo.num_policies >= 2 (or pbt.workspace shared by several runs)")
    if not 0.0 < pbt.replace_fraction <= 0.5:
        raise ConfigError("pbt.replace_fraction", pbt.replace_fraction,
                          "a number in (0, 0.5] (the best and the worst fraction must not overlap)")
    if not 0.0 <= pbt.mutation_rate <= 1.0:
        raise ConfigError("pbt.mutation_rate", pbt.mutation_rate, "a probability in [0, 1]")
    if not pbt.perturb_min >= 1.0:
        raise ConfigError("pbt.perturb_min", pbt.perturb_min, "a factor >= 1 (a value is multiplied or divided by it)")
    if not pbt.perturb_max >= pbt.perturb_min:
        raise ConfigError("pbt.perturb_max", pbt.perturb_max, f"a factor >= pbt.perturb_min={pbt.perturb_min}")
    for key in ("replace_reward_gap", "replace_reward_gap_absolute", "start_mutation"):
        if not pbt[key] >= 0:
            raise ConfigError(f"pbt.{key}", pbt[key], "a number >= 0")
    if not pbt.period_env_steps >= 1:
        raise ConfigError("pbt.period_env_steps", pbt.period_env_steps, "an integer >= 1")
    members = None if pbt.workspace else n
    for k, hyper in (pbt.initial_hyperparams or {}).items():
        if not (int(k) >= 0 and (members is None or int(k) < members)):
            raise ConfigError("pbt.initial_hyperparams", k, f"a policy index in [0, {members})" if members
                              else "a member index >= 0")
        for name in hyper:
            if name not in PBT_HYPERPARAMS and not name.startswith("reward_shaping."):
                raise ConfigError(f"pbt.initial_hyperparams.{k}", name, ", ".join(PBT_HYPERPARAMS)
                                  + ", or reward_shaping.<name>.up|down of the env's shaped quantities")


# Keys of the env node that name the env's family and identity: an evaluation env of another family
# (other spaces, another factory) cannot be played by the trained policies.
EVAL_FIXED_ENV_KEYS = ("family", "factory", "name")


def _check_eval(cfg) -> None:
    """Evaluation during training (eval.*, sf_hydra.evaluation): values that make sense, keys that need it
    on, and env overrides that are keys of this family's env node with values of their type."""
    ev = cfg.eval
    on = eval_on(ev)
    if not ev.every_env_steps >= 0:
        raise ConfigError("eval.every_env_steps", ev.every_env_steps, "an integer >= 0 (0: not by env steps)")
    if not (ev.every_sec >= 0 and math.isfinite(ev.every_sec)):
        raise ConfigError("eval.every_sec", ev.every_sec, "a finite number of seconds >= 0 (0: not by time)")
    if not ev.episodes >= 1:
        raise ConfigError("eval.episodes", ev.episodes, "an integer >= 1 (games per policy and evaluation)")
    if ev.max_episode_steps is not None and not ev.max_episode_steps >= 1:
        raise ConfigError("eval.max_episode_steps", ev.max_episode_steps, "an integer >= 1, or null (never cut)")
    if not ev.video_every >= 0:
        raise ConfigError("eval.video_every", ev.video_every, "an integer >= 0 (evaluations between videos; 0: none)")
    if ev.video_frames is not None and not ev.video_frames >= 1:
        raise ConfigError("eval.video_frames", ev.video_frames, "an integer >= 1, or null (the whole game)")
    needs_on = {"eval.video_every": (ev.video_every, ev.video_every > 0),
                "eval.stop_on_eval_return": (ev.stop_on_eval_return, ev.stop_on_eval_return),
                "eval.env_overrides": (dict(ev.env_overrides or {}), bool(ev.env_overrides))}
    for key, (value, used) in needs_on.items():
        if used and not on:
            raise ConfigError(key, value, f"its default while evaluation is off: set {EVAL_ON} to evaluate during "
                              "training")
    if ev.stop_on_eval_return and cfg.train_until_avg_return is None:
        raise ConfigError("eval.stop_on_eval_return", True, "false while train_until_avg_return is null (there is "
                          "no target return to reach)")
    _check_env_overrides(cfg)


def eval_env(env: DictConfig, overrides: dict) -> DictConfig:
    """The evaluation envs' node: `env` with `overrides` merged in, typed as `env` is (a value of another type
    raises), new keys allowed inside its open mappings (env.kwargs)."""
    node = copy.deepcopy(env)
    OmegaConf.set_struct(node, False)
    return OmegaConf.merge(node, overrides)


def _check_env_overrides(cfg) -> None:
    """Each key of eval.env_overrides is a key of the run's env node (its family's schema) other than
    EVAL_FIXED_ENV_KEYS, and its value has that key's type (OmegaConf merges it into the typed node)."""
    from omegaconf.errors import OmegaConfBaseException

    overrides = OmegaConf.to_container(cfg.eval.env_overrides, resolve=True) if OmegaConf.is_config(
        cfg.eval.env_overrides) else dict(cfg.eval.env_overrides or {})
    keys = [k for k in cfg.env.keys() if k not in EVAL_FIXED_ENV_KEYS]
    for key, value in overrides.items():
        if key not in keys:
            why = (f"{key!r} names the env's family or identity: the evaluation env is the training env's family"
                   if key in EVAL_FIXED_ENV_KEYS else f"{key!r} is not a key of this env's node")
            raise ConfigError(f"eval.env_overrides.{key}", value, f"a key of env=... ({why}): {', '.join(keys)}")
        try:
            eval_env(cfg.env, {key: value})
        except OmegaConfBaseException as e:
            raise ConfigError(f"eval.env_overrides.{key}", value, f"a value env.{key} takes ({type(e).__name__}: "
                              f"{str(e).splitlines()[0]})") from None


def _check_reproducible(cfg) -> None:
    """hardware.reproducible=true: refuses each setting under which a seed cannot repeat a run bit for bit."""
    if not cfg.hardware.reproducible:
        return
    why = "false, or: "
    if not cfg.hardware.serial_mode:
        raise ConfigError("hardware.serial_mode", False, why + "true with hardware.reproducible=true: rollout workers "
                          "in processes of their own deliver trajectories in the order the OS schedules them, so the "
                          "policy lag of every transition, the batches and then the weights differ between two runs")
    if cfg.seed is None:
        raise ConfigError("seed", None, why + "an integer with hardware.reproducible=true (null draws every seed from "
                          "the OS's entropy)")
    if str(cfg.hardware.device) != "cpu":
        raise ConfigError("hardware.device", str(cfg.hardware.device), why + "cpu with hardware.reproducible=true "
                          "(CUDA's fastest kernels sum in a varying order; its deterministic ones are not checked "
                          "here)")
    if cfg.train_for_seconds < TrainDefaults.train_for_seconds:
        raise ConfigError("train_for_seconds", cfg.train_for_seconds, why + "no time budget with "
                          "hardware.reproducible=true (a run stops at whatever env step the clock says): a budget of "
                          "train_for_env_steps")
    if cfg.pbt.workspace:
        raise ConfigError("pbt.workspace", cfg.pbt.workspace, why + "null with hardware.reproducible=true (members of "
                          "a workspace read each other's results as they happen to be written)")
    _check_reproducible_eval(cfg, why)


def _check_reproducible_eval(cfg, why: str) -> None:
    """What decides on evaluations during training: the learner never waits for one (it uses each when it
    arrives, some batches after its weights were taken, as the OS schedules the evaluation process), so a
    decision taken on them falls at another step in each run. Refused rather than awaited: awaiting would stop
    training for every evaluation, and a resumed run would need the latest results back."""
    late = "arrives whenever the evaluation process ends, some learner steps after its weights were taken"
    if cfg.pbt.with_pbt and is_eval_metric(cfg.pbt.target_objective):
        raise ConfigError("pbt.target_objective", cfg.pbt.target_objective, why + "a statistic of the training "
                          f"episodes (e.g. true_objective) with hardware.reproducible=true: each evaluation {late}, "
                          "so PBT's looks would rank different values in two runs")
    if cfg.eval.stop_on_eval_return:
        raise ConfigError("eval.stop_on_eval_return", True, why + "false with hardware.reproducible=true: the "
                          f"evaluation that reaches train_until_avg_return {late}, so the run would stop at another "
                          "step each time (train_until_avg_return alone stops by the training episodes)")


def _check_sweep_objective(cfg) -> None:
    """sweep_objective=time_to_target scores the seconds until train_until_avg_return stopped the run."""
    if cfg.sweep_objective == "time_to_target" and cfg.train_until_avg_return is None:
        raise ConfigError("sweep_objective", cfg.sweep_objective, "avg_return while train_until_avg_return is null "
                          "(time_to_target scores the seconds until the run reaches that return: set "
                          "train_until_avg_return=<target>)")


def _check_benchmark(cfg) -> None:
    """benchmark=true learns nothing: population-based training would rank and copy untrained policies."""
    if cfg.benchmark and cfg.pbt.with_pbt:
        raise ConfigError("pbt.with_pbt", True, "false with benchmark=true (no policy learns, there is nothing to "
                          "rank)")


def _check_data_parallel(cfg) -> None:
    """Several learner ranks (hardware.devices x hardware.num_nodes > 1) train one policy, each rank with its
    own sampler; what would make the ranks learn different things is refused by name."""
    hw = cfg.hardware
    if hw.devices * hw.num_nodes == 1:
        return
    why = f"with hardware.devices={hw.devices} x hardware.num_nodes={hw.num_nodes} learner ranks (data-parallel"
    if cfg.algo.num_policies != 1:
        raise ConfigError("algo.num_policies", cfg.algo.num_policies, f"1 {why} trains one policy)")
    if cfg.pbt.with_pbt:
        raise ConfigError("pbt.with_pbt", True, f"false {why} training has no population)")
    if cfg.selfplay.pool_size > 0:
        raise ConfigError("selfplay.pool_size", cfg.selfplay.pool_size, f"0 {why} training has no opponent pool)")
    for key in ("eval.every_env_steps", "eval.every_sec"):
        if _get(cfg, key) > 0:  # each rank would start an evaluator writing the one run folder's eval/
            raise ConfigError(key, _get(cfg, key), f"0 {why} training does not evaluate during training yet; "
                              "evaluate its checkpoints with enjoy.py)")
    if cfg.hardware.reproducible:
        raise ConfigError("hardware.reproducible", True, f"false {why} ranks' samplers run asynchronously)")
    if hw.serial_mode:  # its workers act in the learner's process, whose generators every rank seeds alike
        raise ConfigError("hardware.serial_mode", True, f"false {why}: serial workers draw their actions from the "
                          "learner's torch generator, which every rank seeds with the run's seed for identical "
                          "initial weights (and a resume restores rank 0's), so every rank would draw the same "
                          "random stream)")


def check_pbt_against_env(cfg, reported, shaping) -> None:
    """`pbt.target_objective` is true_objective or a statistic the env declares it reports
    (`reported`: the env family's episode_stats); a reward_shaping.* name in
    pbt.initial_hyperparams is one of the env's shaped quantities (`shaping`)."""
    declared = [f"reward_shaping.{n}.{side}" for n in shaping for side in ("up", "down")]
    for k, hyper in (cfg.pbt.initial_hyperparams or {}).items():
        for key in hyper:
            if key.startswith("reward_shaping.") and key not in declared:
                raise ConfigError(f"pbt.initial_hyperparams.{k}", key, ", ".join(declared) if declared else
                                  "no reward_shaping.* name: this env declares no reward shaping")
    if cfg.pbt.with_pbt:
        check_metric(cfg, "pbt.target_objective", env_stats=reported)


def _check_missing(cfg) -> None:
    """A mandatory value left at ??? (e.g. `env=gym/any` without `env.id=...`) is named here,
    instead of surfacing as an OmegaConf error about whichever key interpolates it."""
    def first_missing(node, prefix: str):
        for key, value in node.items():  # unresolved: OmegaConf.missing_keys would resolve interpolations
            if value == "???":
                return prefix + str(key)
            if isinstance(value, dict):
                found = first_missing(value, f"{prefix}{key}.")
                if found:
                    return found
        return None

    if isinstance(cfg, DictConfig):
        key = first_missing(OmegaConf.to_container(cfg, resolve=False), "")
        if key:
            raise ConfigError(key, "???", f"a value must be given, e.g. {key}=... on the command line")


def check_values(cfg) -> None:
    """The rules on a value of its own (a range, a finite number, a mandatory value given). A resumed run
    checks the command line's config with these before its saved config is put under what was typed
    (sf_hydra.app.resume_config), so that a value that is invalid is refused as invalid, not as a change the
    run folder does not take, nor passed over because the run has finished."""
    _check_missing(cfg)
    _check_ranges(cfg)


def validate(cfg) -> None:
    """Raises ConfigError on the first rule the config breaks. Only the config's own rules: what
    the env family, the sampler and the model parts check runs after this (sf_hydra.app.train.check_config)."""
    check_values(cfg)
    _check_checkpoints(cfg)
    _check_losses(cfg)
    _check_input_normalization(cfg)
    _check_sampling(cfg)
    _check_pbt(cfg)
    _check_eval(cfg)
    _check_reproducible(cfg)
    _check_benchmark(cfg)
    _check_sweep_objective(cfg)
    _check_data_parallel(cfg)
