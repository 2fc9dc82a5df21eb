"""One training run from a composed config: validate, prepare the run folder, build the
learner and sampler, fit, and leave a checkpoint and a summary behind whatever happens."""

from __future__ import annotations

import json
import logging
import math
import random
import time
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from omegaconf import OmegaConf

from sf_hydra import run_dir as rd
from sf_hydra.config import ConfigError, validate
from sf_hydra.config.validation import check_pbt_against_env
from sf_hydra.envs import check_env, episode_stats, reward_shaping
from sf_hydra.faults import EnvStartError, NonFiniteTraining
from sf_hydra.launch import signals
from sf_hydra.learner.profile import profile_lines
from sf_hydra.loggers import build_loggers, finish_wandb
from sf_hydra.resume_config import check_resume_config, save_config
from sf_hydra.targets import check_targets
from sf_hydra.trainer_parts import PARTS, check_parts

log = logging.getLogger("sf_hydra")


def seed_everything(seed: Optional[int]) -> None:
    if seed is not None:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)


def quiet_lightning() -> None:
    """Lightning's own console handler would print every line twice next to Hydra's, and
    its start-up tips are noise in a training log; our `IterableDataset.__len__` is on
    purpose (see sampler/training_batches.py)."""
    import warnings

    for name in ("lightning.pytorch", "lightning.fabric"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*IterableDataset. has .__len__. defined.*")
    warnings.filterwarnings("ignore", message=".*isinstance.treespec, LeafSpec.*")
    # Batches come from the sampler's processes, not from DataLoader workers (num_workers=0 on purpose).
    warnings.filterwarnings("ignore", message=".*does not have many workers which may be a bottleneck.*")
    # The learner moves batches itself (PPOLearner.transfer_batch_to_device); the data module has no say.
    warnings.filterwarnings("ignore", message=".*overridden `transfer_batch_to_device` in `LightningModule`.*")
    # Printed on any machine with Slurm installed; inside a job our launcher handles Slurm.
    warnings.filterwarnings("ignore", message=".*`srun` command is available.*")


def initial_policies(cfg, env) -> list:
    """Models of the learner's policies as it will build them (PPOLearner builds its
    `algo.num_policies` models first, from the same random state), under a forked RNG: what they
    draw leaves the learner's own draws unchanged, so the learner's initial weights are these."""
    from sf_hydra.models import build_model

    with torch.random.fork_rng():
        return [build_model(cfg, env.observation_space, env.action_space) for _ in range(cfg.algo.num_policies)]


def launch_sampler(cfg, env, fresh_run: bool = True):
    """The sampler for the env's spaces, its worker processes started (sampler/sampler.py Sampler.launch),
    each policy's store holding the learner's initial weights (`initial_policies`). A fresh run's workers get
    their slots at once and collect while this process imports Lightning and builds the learner; a resumed
    run's (or a PBT run's, whose policies start from perturbed settings) wait for the learner's first
    publish, so that nobody acts with weights the learner will not train."""
    from sf_hydra.sampler.sampler import Sampler

    policies = initial_policies(cfg, env)
    sampler = Sampler(cfg, env.observation_space, env.action_space, policies[0], env.num_agents)
    for k, model in enumerate(policies):
        sampler.publish(k, model, 0)
    sampler.launch(hand_out_slots=fresh_run and not cfg.pbt.with_pbt)
    return sampler


def build_trainer(cfg, run_dir: Path, resuming: Optional[bool] = None):
    """The Lightning Trainer with the run's loggers and callbacks, all from config (sf_hydra.trainer_parts):
    `trainer` (conf/trainer/), the TensorBoard and W&B loggers of the `logger` keys (sf_hydra.loggers)
    followed by `logger.extra`'s, and `callbacks` (conf/callbacks/), whose `${run_dir}` is `run_dir` here.
    Returns (trainer, the StopConditions callback, the PeriodicCheckpoint callback); with benchmark=true
    the checkpoint callback is built but not given to the trainer (nothing is learned, nothing saved)."""
    from sf_hydra.learner.callbacks import StopConditions
    from sf_hydra.learner.checkpointing import PeriodicCheckpoint
    from sf_hydra.trainer_parts import instantiate_callbacks, instantiate_loggers, instantiate_trainer

    quiet_lightning()
    if resuming is None:
        resuming = rd.resume_checkpoint(run_dir) is not None
    parts = OmegaConf.merge(cfg, {"run_dir": str(run_dir)})  # a copy whose ${run_dir} is this very folder
    loggers = build_loggers(cfg, run_dir, resuming=resuming) + instantiate_loggers(parts.logger.extra)
    callbacks = instantiate_callbacks(parts.callbacks)
    stop = _one_of(callbacks, StopConditions, "the stop conditions (budgets, signals)")
    checkpoints = _one_of(callbacks, PeriodicCheckpoint, "the checkpoints (last.ckpt, which a resume starts from)")
    if cfg.benchmark:
        callbacks.remove(checkpoints)
    trainer = instantiate_trainer(parts.trainer, logger=loggers or False, callbacks=callbacks)
    return trainer, stop, checkpoints


def _one_of(callbacks: list, kind: type, what: str):
    """The one callback of class `kind`: every run needs it (ConfigError naming `callbacks` otherwise)."""
    found = [c for c in callbacks if isinstance(c, kind)]
    if len(found) != 1:
        raise ConfigError("callbacks", f"{len(found)} {kind.__module__}.{kind.__name__} nodes",
                          f"exactly one node of {kind.__name__}, {what} (conf/callbacks/default.yaml)")
    return found[0]


def finite_or_none(value):
    """The value with every NaN or infinite float replaced by None: summary.json stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_or_none(v) for v in value]
    return value


def write_summary(run_dir: Path, module, stop_reason: Optional[str], session_seconds: float,
                  session_steps: int) -> dict:
    summary = {
        "env_steps": module.env_steps, "train_seconds": module.train_seconds,
        "fps": session_steps / session_seconds if session_seconds > 0 else 0.0,
        "avg_return": module.avg_return(), "avg_length": module.avg_length(), "episodes": module.episodes_total,
        "policy_version": module.policy_version, "stop_reason": stop_reason,
        "policies": [{"policy": k, "env_steps": s.env_steps, "policy_version": s.version, "avg_return": s.avg_return(),
                      "avg_length": s.avg_length(), "episodes": s.episodes_total, **s.outcome_rates(),
                      "episode_stats": s.avg_extra(), "hyperparams": module.hyperparams[k]}
                     for k, s in enumerate(module.stats)],
        "profile": module.profile.report(),  # seconds per component, this session (learner/profile.py)
    }
    (run_dir / "summary.json").write_text(json.dumps(finite_or_none(summary), indent=2, allow_nan=False))
    return summary


def _without_parts(cfg) -> dict:
    """`cfg` as a container without the Lightning parts' nodes (sf_hydra.trainer_parts.PARTS checks them)."""
    tree = OmegaConf.to_container(cfg, resolve=True)
    for key, _ in PARTS:
        *parents, leaf = key.split(".")
        node = tree
        for name in parents:
            node = node.get(name) or {}
        node.pop(leaf, None)
    return tree


def check_config(cfg) -> None:
    """Every check that runs before any process starts, raising ConfigError: the config's own
    rules (sf_hydra.config), then, from the layers above it, every `_target_` importable, the
    env family's validation of its node, and the sampler's vector-backend choice."""
    from sf_hydra.sampler.vector_envs import check_batched_sampling

    validate(cfg)
    check_targets(_without_parts(cfg))
    check_parts(cfg)  # the trainer's, callbacks' and extra loggers' targets, Lightning left unimported
    check_env(cfg.env)
    check_pbt_against_env(cfg, episode_stats(cfg.env), reward_shaping(cfg.env))
    check_batched_sampling(cfg)


def check_config_against_env(cfg):
    """The rules that need the env's spaces, read from one env build (or hardware.use_env_info_cache)
    and from a model built from the config: raises ConfigError before any process starts and before
    the run folder is touched (restart_behavior=overwrite must not delete a run for a bad key).
    Returns the env's EnvInfo."""
    from sf_hydra.learner.loss_rules import check_losses_apply
    from sf_hydra.models import build_model
    from sf_hydra.models.actor_critic import check_model_for_env
    from sf_hydra.sampler.env_info import env_info
    from sf_hydra.sampler.sampler import check_sampling_options
    from sf_hydra.trajectory import model_trajectory_spec

    try:
        env = env_info(cfg)  # one env build (or the cache): its spaces and agent count
    except ConfigError:
        raise  # an env key the env's own checks refuse (env.downsample=0): a bad config, not a crash
    except Exception as e:
        raise EnvStartError(cfg.env, e) from e
    check_sampling_options(cfg, env.num_agents)  # the rules that need the agent count
    check_model_for_env(cfg, env.observation_space, env.action_space)  # the rules that need the spaces
    with torch.random.fork_rng():  # the learner's initial weights stay those of the seed
        model = build_model(cfg, env.observation_space, env.action_space)
    spec = model_trajectory_spec(env.observation_space, env.action_space, model, cfg.algo.num_policies)
    check_losses_apply(cfg.algo, env.action_space, spec)  # symmetric_kl, kl_loss_coeff: the spaces, the model
    return env


def train(cfg) -> dict:
    """Runs (or resumes) the experiment described by `cfg`; returns the run's summary."""
    check_config(cfg)
    run_dir = Path(cfg.run_dir).absolute()
    with rd.RunLock(run_dir):  # a second run on this folder is refused while this one lives
        return _train_in(cfg, run_dir)


def _train_in(cfg, run_dir: Path) -> dict:
    env = check_config_against_env(cfg)
    rd.prepare(run_dir, cfg.restart_behavior)
    check_resume_config(cfg, run_dir)  # a resumed run keeps its saved config: other changes are refused
    done = rd.finished_summary(run_dir, cfg.train_for_env_steps)
    if done is not None:
        log.info("run folder %s: already trained for %d env steps (train_for_env_steps=%d); nothing to do", run_dir,
                 done["env_steps"], cfg.train_for_env_steps)
        return done
    ckpt = rd.resume_checkpoint(run_dir, cfg.load_checkpoint_kind)  # ConfigError: kind=best and no best yet
    save_config(cfg, run_dir)
    torch.set_num_threads(cfg.hardware.torch_threads)
    seed_everything(cfg.seed)

    from sf_hydra.sampler.sampler import SamplerError

    sampler = launch_sampler(cfg, env, fresh_run=ckpt is None)  # the workers start while this process imports
    failed = True
    try:
        from sf_hydra.learner.ppo_learner import PPOLearner
        from sf_hydra.sampler.datamodule import SamplerDataModule

        module = PPOLearner(cfg, env.observation_space, env.action_space)
        datamodule = SamplerDataModule(cfg, env.observation_space, env.action_space, module,
                                       num_agents=env.num_agents, sampler=sampler)
        trainer, stop, checkpoints = build_trainer(cfg, run_dir, resuming=ckpt is not None)
        log.info("run folder %s (%s)", run_dir, f"resuming from {ckpt.name}" if ckpt else "new run")
        t0 = time.monotonic()
        signals.remember_handlers()
        try:
            try:
                trainer.fit(module, datamodule=datamodule, ckpt_path=str(ckpt) if ckpt else None,
                            weights_only=True)  # sf_hydra's part of a checkpoint holds only plain types
            finally:
                signals.catch_again()  # the stop signals were held over Lightning's teardown
            last = None if cfg.benchmark else checkpoints.save(trainer, module.env_steps)
            failed = False
        except (SamplerError, NonFiniteTraining) as e:
            # The learner's state is whole (the failure came from the data side, or its non-finite
            # updates were skipped): keep it.
            what = "sampling failed" if isinstance(e, SamplerError) else "training diverged"
            if cfg.benchmark:
                raise
            last = checkpoints.save(trainer, module.env_steps)
            log.error("%s; the learner state was saved to %s", what, last)
            raise
    finally:
        sampler.stop()
        finish_wandb(failed)
        signals.release()  # caught since StopConditions.on_train_start; the final save is behind us
    elapsed = time.monotonic() - t0
    summary = write_summary(run_dir, module, stop.reason, elapsed, module.env_steps - stop.start_env_steps)
    for line in profile_lines(summary["profile"]):
        log.info("%s", line)
    if cfg.benchmark:
        log.info("benchmark stopped (%s): %d env steps sampled in %.1f s, FPS %.0f (no learning, no checkpoint)",
                 stop.reason, module.env_steps, elapsed, summary["fps"])
    else:
        log.info("stopped (%s): %d env steps, avg return %s, checkpoint %s", stop.reason, module.env_steps,
                 summary["avg_return"], last)
    return summary
