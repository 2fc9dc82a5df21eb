"""One training run from a composed config: check it (sf_hydra.app.checks), prepare the run folder, build the
learner and sampler, fit, and leave a checkpoint and a summary behind whatever happens."""

from __future__ import annotations

import json
import logging
import math
import signal
import time
import warnings
from pathlib import Path
from typing import Dict, Optional, Sequence

from omegaconf import OmegaConf

from sf_hydra.app.checks import Checked, check_before_start, check_config, checked_plan  # noqa: F401 (re-exported)
from sf_hydra.app.loggers import build_loggers, finish_wandb
from sf_hydra.app.resume_config import save_config
from sf_hydra.app.topology import RunStart, Topology, choose
from sf_hydra.app.topology.start import FINISHED
from sf_hydra.config import ConfigError
from sf_hydra.config.aliases import more_workers_than_cores
from sf_hydra.config.trust import seal_run
from sf_hydra.core import run_dir as rd
from sf_hydra.core import signals
from sf_hydra.core.faults import NonFiniteTraining
from sf_hydra.core.files import write_atomically
from sf_hydra.core.seal import key_path
from sf_hydra.learner.profile import profile_lines
from sf_hydra.plan import RunPlan, plan_for_rank

log = logging.getLogger("sf_hydra")


def quiet_lightning() -> None:
    """Lightning's own console handler would print every line twice next to Hydra's, and
    its start-up tips are noise in a training log; our `IterableDataset.__len__` is on
    purpose (see sampler/training_batches.py)."""
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


def launch_sampler(plan: RunPlan, hand_out_slots: bool):
    """The sampler of the run's plan, its worker processes started (sampler/sampler.py Sampler.launch),
    each policy's store holding the plan's initial policies, which the learner trains. With
    `hand_out_slots` (a fresh run) the workers get their slots at once and collect while this process
    imports Lightning and builds the learner; a resumed run's (or a PBT run's, whose policies start from
    perturbed settings) wait for the learner's first publish, so that nobody acts with weights the
    learner will not train."""
    from sf_hydra.sampler.sampler import Sampler  # the sampler's modules load once the config passed

    sampler = Sampler(plan.sampler, plan.spec, plan.spaces, plan.initial_policies[0])
    for k, model in enumerate(plan.initial_policies):
        sampler.publish(k, model, 0)
    sampler.launch(hand_out_slots=hand_out_slots)
    return sampler


def build_trainer(cfg, run_dir: Path, resuming: Optional[bool] = None, topology: Optional[Topology] = None):
    """The Lightning Trainer with the run's loggers and callbacks, all from config (sf_hydra.app.trainer_parts):
    `trainer` (conf/trainer/), the TensorBoard and W&B loggers of the `logger` keys (sf_hydra.app.loggers)
    followed by `logger.extra`'s, and `callbacks` (conf/callbacks/), whose `${run_dir}` is `run_dir` here.
    Returns (trainer, the StopConditions callback, the PeriodicCheckpoint callback); with benchmark=true
    the checkpoint callback is built but not given to the trainer (nothing is learned, nothing saved). The
    `topology` (none: one rank) gives the strategy (data-parallel for several ranks: learner/ddp.py); only rank 0
    has loggers."""
    # Lightning's side: built after launch_sampler, while the workers start (importing Lightning costs seconds)
    from sf_hydra.app.trainer_parts import instantiate_callbacks, instantiate_loggers, instantiate_trainer
    from sf_hydra.learner.callbacks import StopConditions
    from sf_hydra.learner.checkpointing import PeriodicCheckpoint

    quiet_lightning()
    if resuming is None:
        resuming = rd.resume_checkpoint(run_dir) is not None
    parts = OmegaConf.merge(cfg, {"run_dir": str(run_dir)})  # a copy whose ${run_dir} is this very folder
    loggers = []
    if topology is None or topology.place.is_zero:
        loggers = build_loggers(cfg, run_dir, resuming=resuming) + instantiate_loggers(parts.logger.extra)
    callbacks = instantiate_callbacks(parts.callbacks)
    stop = _one_of(callbacks, StopConditions, "the stop conditions (budgets, signals)")
    checkpoints = _one_of(callbacks, PeriodicCheckpoint, "the checkpoints (last.ckpt, which a resume starts from)")
    if cfg.benchmark:
        callbacks.remove(checkpoints)
    strategy = topology.strategy(cfg) if topology is not None else None
    runtime = {"strategy": strategy} if strategy is not None else {}
    trainer = instantiate_trainer(parts.trainer, logger=loggers or False, callbacks=callbacks, **runtime)
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
                  session_steps: int, world_size: int = 1) -> dict:
    """<run_dir>/summary.json: the run's counters and returns (every rank's), and the profile, which in a
    data-parallel run (`world_size` > 1) is learner rank 0's alone and says so (`profile_of`)."""
    summary = {
        "env_steps": module.env_steps, "train_seconds": module.train_seconds,
        "fps": session_steps / session_seconds if session_seconds > 0 else 0.0,
        "avg_return": module.avg_return(), "avg_length": module.avg_length(), "episodes": module.episodes_total,
        "policy_version": module.policy_version, "stop_reason": stop_reason,
        "policies": [{"policy": k, "env_steps": s.env_steps, "policy_version": s.version, "avg_return": s.avg_return(),
                      "true_return": s.avg_true_return(), "avg_length": s.avg_length(), "episodes": s.episodes_total,
                      **s.outcome_rates(),
                      "episode_stats": s.avg_extra(), "hyperparams": module.hyperparams[k]}
                     for k, s in enumerate(module.stats)],
        "profile": module.profile.report(),  # seconds per component, this session (learner/profile.py)
    }
    if world_size > 1:  # each rank's profile is its own (its learner's parts, its sampler's workers)
        summary["profile_of"] = "learner rank 0 (the other ranks log their own at the end of their log)"
    text = json.dumps(finite_or_none(summary), indent=2, allow_nan=False)
    write_atomically(run_dir / "summary.json", lambda tmp: tmp.write_text(text))
    return summary


def train(cfg, checked: Optional[Checked] = None, typed: Sequence[str] = ()) -> dict:
    """Runs (or resumes) the experiment described by `cfg`; returns the run's summary (a rank > 0's own). The checks
    (sf_hydra.app.checks) run before the run folder is locked; those `checked` (the command line's, before Hydra
    ran the job) passed for `cfg` are not run again, and its look at the run folder is the start's. `typed`: the
    layout keys typed on the command line (app/layout.py typed_layout_keys), which hardware.layout=auto keeps.
    How the run is laid over processes and hosts is its topology (app/topology/)."""
    check_before_start(cfg, checked)
    run_dir = Path(cfg.run_dir).absolute()
    topology = choose(cfg)  # ConfigError: the environment contradicts hardware.devices or hardware.num_nodes
    with topology.hold(run_dir):  # rank 0: a second run on this folder is refused while this one lives
        plan = checked_plan(cfg)  # the last stage of sf_hydra.app.checks: the run's plan, seeded
        looked = checked.start if checked is not None and checked.passed_for(cfg) else None  # the checks' look
        start = topology.begin(cfg, run_dir, model_shapes(plan), looked)
        if start.kind == FINISHED:
            log.info("%s", start.message)
            return start.summary or {"rank": topology.place.rank, "stop_reason": None, "finished": start.message}
        plan = topology.prepare(plan, lambda built: prepare_run_folder(cfg, run_dir, built, start, typed))
        plan = plan_for_rank(plan, topology.place.rank, topology.place.local_rank)
        return topology.fit(cfg, run_dir, plan, start, fit_rank)


def prepare_run_folder(cfg, run_dir: Path, plan: RunPlan, start: RunStart, typed: Sequence[str]) -> RunPlan:
    """Rank 0 picks the layout (hardware.layout=auto: a new run's; `typed`, the layout keys the command line typed,
    are kept) and writes the run's config, seal and spaces; returns the plan for that layout."""
    if str(cfg.hardware.layout) == "auto":
        plan = choose_layout(cfg, plan, start.checkpoint, typed)
    warn_more_workers_than_cores(cfg)
    save_config(cfg, run_dir)
    if seal_run(run_dir) is None:  # the code this config names is the user's: enjoy and export load it, no flag
        log.warning("no seal key could be read or made at %s (set SF_HYDRA_HOME to a writable folder): enjoy, "
                    "export and Policy.load will treat this run's own code as from elsewhere (trusted_targets)",
                    key_path())
    rd.save_spaces(run_dir, plan.spaces.observation, plan.spaces.action, plan.spaces.num_agents)  # for Policy.load
    return plan


def model_shapes(plan: RunPlan) -> Dict[str, tuple]:
    """{name in the learner's state_dict: shape} of the run's models: what a checkpoint to resume must fit."""
    return {f"policies.{k}.{name}": tuple(t.shape) for k, model in enumerate(plan.initial_policies)
            for name, t in model.state_dict().items()}


def choose_layout(cfg, plan: RunPlan, ckpt: Optional[str], typed: Sequence[str]) -> RunPlan:
    """hardware.layout=auto: a new run probes this machine and env and writes the layout it picked into `cfg`
    (config.yaml saves it), then plans again for it (the same seed: the same initial weights); a resumed run
    (`ckpt`) keeps the layout its config.yaml saved and probes nothing. Either way one line says so."""
    hw = cfg.hardware
    if ckpt is not None:
        log.info("hardware.layout=auto: resuming with the layout picked at the run's start (config.yaml): "
                 "num_workers=%s, num_envs_per_worker=%s, worker_num_splits=%s, inference=%s (no probe)",
                 hw.num_workers, hw.num_envs_per_worker, hw.worker_num_splits, hw.inference)
        return plan
    from sf_hydra.app.layout_probe import apply_layout
    from sf_hydra.sampler.env_info import EnvInfo

    info = EnvInfo(plan.spaces.observation, plan.spaces.action, plan.spaces.num_agents)
    log.info("%s", apply_layout(cfg, typed, plan, info))
    return checked_plan(cfg)


def warn_more_workers_than_cores(cfg) -> None:
    """One warning when the run's rollout worker processes outnumber its cores (not in serial mode, where
    no worker has a process of its own)."""
    hw = cfg.hardware
    said = None if hw.serial_mode else more_workers_than_cores(hw.num_workers, hw.num_envs_per_worker, hw.devices)
    if said is not None:
        log.warning("%s", said)


def shown_return(value: Optional[float]) -> str:
    """An average return as the progress lines show it (two decimals), "n/a" before any episode ended."""
    return "n/a" if value is None else f"{value:.2f}"


def fit_rank(cfg, run_dir: Path, plan: RunPlan, start: RunStart, topology: Topology) -> dict:
    """Trains this rank's learner with its sampler from the start's checkpoint (none: a new run); rank 0 writes the
    summary."""
    from sf_hydra.sampler.sampler import SamplerError  # the sampler's modules: loaded once the checks passed

    ckpt = Path(start.checkpoint) if start.checkpoint else None
    ranks = topology.place

    # A stop signal from here on stops the run with a checkpoint (during start-up: as training starts)
    signals.catch(lambda signum, frame: signals.take(signal.Signals(signum)))
    try:  # the workers start while this process imports Lightning and builds the learner
        sampler = launch_sampler(plan, hand_out_slots=ckpt is None and not cfg.pbt.with_pbt)
    except BaseException:
        signals.release()
        raise
    failed = True
    try:
        # Lightning loads here, while the workers start (launch_sampler above)
        from sf_hydra.learner.ppo_learner import PPOLearner
        from sf_hydra.sampler.datamodule import SamplerDataModule

        module = PPOLearner(plan.initial_policies, plan.learner, plan.spec)
        datamodule = SamplerDataModule(sampler, plan.batches)
        trainer, stop, checkpoints = build_trainer(cfg, run_dir, resuming=ckpt is not None, topology=topology)
        log.info("run folder %s (%s)", run_dir, f"resuming from {ckpt.name}" if ckpt else "new run")
        t0 = time.monotonic()
        signals.remember_handlers()
        try:
            try:
                trainer.fit(module, datamodule=datamodule, ckpt_path=str(ckpt) if ckpt else None,
                            weights_only=True)  # sf_hydra's part of a checkpoint holds only plain types
            except SystemExit:
                if signals.aborted():  # Lightning's exit for the KeyboardInterrupt of a repeated stop signal
                    raise KeyboardInterrupt from None
                raise
            finally:
                signals.finishing()  # a signal from now on waits for the final checkpoint
                signals.catch_again()  # the stop signals were held over Lightning's teardown
            last = None if cfg.benchmark else checkpoints.save(trainer, module.env_steps)
            failed = False
        except (SamplerError, NonFiniteTraining) as e:
            # The learner's state is whole (the failure came from the data side, or its non-finite
            # updates were skipped): keep it.
            what = "sampling failed" if isinstance(e, SamplerError) else "training diverged"
            if cfg.benchmark or ranks.distributed:  # data-parallel: the other ranks are not at a save (a collective)
                raise
            last = checkpoints.save(trainer, module.env_steps)
            log.error("%s; the learner state was saved to %s", what, last)
            raise
    finally:
        sampler.stop()
        finish_wandb(failed)
        signals.release()  # caught since StopConditions.on_train_start; the final save is behind us
    elapsed = time.monotonic() - t0
    if not ranks.is_zero:
        for line in profile_lines(module.profile.report()):
            log.info("learner rank %d: %s", ranks.rank, line)
        return {"env_steps": module.env_steps, "stop_reason": stop.reason, "rank": ranks.rank,
                "avg_return": module.avg_return(),  # the run's, as every rank holds the same statistics
                "train_seconds": module.train_seconds}  # rank 0's (StopConditions)
    summary = write_summary(run_dir, module, stop.reason, elapsed, module.env_steps - stop.start_env_steps,
                            ranks.world_size)
    for line in profile_lines(summary["profile"]):
        log.info("%s", line)
    if cfg.benchmark:
        log.info("benchmark stopped (%s): %d env steps sampled in %.1f s, FPS %.0f (no learning, no checkpoint)",
                 stop.reason, module.env_steps, elapsed, summary["fps"])
    else:
        log.info("stopped (%s): %d env steps, avg return %s, checkpoint %s", stop.reason, module.env_steps,
                 shown_return(summary["avg_return"]), last)
    return summary
