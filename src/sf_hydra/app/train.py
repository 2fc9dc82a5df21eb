"""One training run from a composed config: check it (sf_hydra.app.checks), prepare the run folder, build the
learner and sampler, fit, and leave a checkpoint and a summary behind whatever happens."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import time
import traceback
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Dict, Optional, Sequence

from omegaconf import OmegaConf

from sf_hydra.app.checks import Checked, check_before_start, check_config, check_config_against_env  # noqa: F401 (re-exported)
from sf_hydra.app.loggers import build_loggers, finish_wandb
from sf_hydra.app.ranks import (
    RANKS_DIR,
    START,
    LocalRanks,
    Ranks,
    StartDecision,
    announce_start,
    await_start,
    config_fingerprint,
    env_rendezvous,
    forget_start,
    log_to_rank_file,
    never_joined,
    node_name,
    ranks_of,
    read_start,
    record_rank,
    record_start,
    recorded_rank_end,
    same_config,
    session_of,
    start_local_ranks,
    use_interface_to_master,
    use_interface_to_peers,
)
from sf_hydra.app.resume_config import finished, save_config
from sf_hydra.config import ConfigError
from sf_hydra.config.aliases import more_workers_than_cores
from sf_hydra.config.trust import seal_run
from sf_hydra.core import run_dir as rd
from sf_hydra.core import signals
from sf_hydra.core.faults import Fault, NodeLost, NonFiniteTraining, RankFailed
from sf_hydra.core.files import write_atomically
from sf_hydra.core.seal import key_path
from sf_hydra.learner.profile import profile_lines
from sf_hydra.plan import RunPlan, plan_for_rank

log = logging.getLogger("sf_hydra")
SINGLE = Ranks(1, 0, 0, False)


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


def build_trainer(cfg, run_dir: Path, resuming: Optional[bool] = None, ranks: Optional[Ranks] = None):
    """The Lightning Trainer with the run's loggers and callbacks, all from config (sf_hydra.app.trainer_parts):
    `trainer` (conf/trainer/), the TensorBoard and W&B loggers of the `logger` keys (sf_hydra.app.loggers)
    followed by `logger.extra`'s, and `callbacks` (conf/callbacks/), whose `${run_dir}` is `run_dir` here.
    Returns (trainer, the StopConditions callback, the PeriodicCheckpoint callback); with benchmark=true
    the checkpoint callback is built but not given to the trainer (nothing is learned, nothing saved). With several
    `ranks`, the strategy is data-parallel (learner/ddp.py) and only rank 0 has loggers."""
    # Lightning's side: built after launch_sampler, while the workers start (importing Lightning costs seconds)
    from sf_hydra.app.trainer_parts import instantiate_callbacks, instantiate_loggers, instantiate_trainer
    from sf_hydra.learner.callbacks import StopConditions
    from sf_hydra.learner.checkpointing import PeriodicCheckpoint

    quiet_lightning()
    if resuming is None:
        resuming = rd.resume_checkpoint(run_dir) is not None
    parts = OmegaConf.merge(cfg, {"run_dir": str(run_dir)})  # a copy whose ${run_dir} is this very folder
    ranks = ranks or SINGLE
    loggers = []
    if ranks.is_zero:
        loggers = build_loggers(cfg, run_dir, resuming=resuming) + instantiate_loggers(parts.logger.extra)
    callbacks = instantiate_callbacks(parts.callbacks)
    stop = _one_of(callbacks, StopConditions, "the stop conditions (budgets, signals)")
    checkpoints = _one_of(callbacks, PeriodicCheckpoint, "the checkpoints (last.ckpt, which a resume starts from)")
    if cfg.benchmark:
        callbacks.remove(checkpoints)
    runtime = {}
    if ranks.distributed:
        from sf_hydra.learner.ddp import data_parallel_strategy

        network = use_interface_to_peers() if ranks.via_slurm else use_interface_to_master() if ranks.via_env else None
        if network is not None:  # ranks on several nodes
            log.info("learner rank %d on %s", ranks.rank, network)
        runtime["strategy"] = data_parallel_strategy(cfg.hardware.ddp_timeout_sec, ranks.via_slurm)
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
    """Runs (or resumes) the experiment described by `cfg`; returns the run's summary. The checks
    (sf_hydra.app.checks) run before the run folder is locked; those `checked` (the command line's, before
    Hydra composed this config) passed for an equal config are not run again. `typed`: the layout keys typed
    on the command line (app/layout.py typed_layout_keys), which hardware.layout=auto keeps."""
    check_before_start(cfg, checked)
    run_dir = Path(cfg.run_dir).absolute()
    ranks = ranks_of(cfg.hardware.devices, cfg.hardware.num_nodes)  # ConfigError: several nodes, no rendezvous
    if not ranks.is_zero:  # a data-parallel rank > 0: rank 0 holds the folder's lock and writes into it
        if ranks.via_slurm or (ranks.via_env and ranks.starts_node):  # a Hydra task: it logs into the run's train.log
            log_to_rank_file(run_dir, ranks.rank)
        if ranks.via_slurm or ranks.via_env:
            return _as_recorded_rank(cfg, run_dir, ranks)
        return _train_in(cfg, run_dir)
    with rd.RunLock(run_dir):  # a second run on this folder is refused while this one lives
        return _train_in(cfg, run_dir, typed)


def _train_in(cfg, run_dir: Path, typed: Sequence[str] = ()) -> dict:
    ranks = ranks_of(cfg.hardware.devices, cfg.hardware.num_nodes)  # this process's place (train() read it too)
    plan = check_config_against_env(cfg)  # the last stage of sf_hydra.app.checks: the run's plan, seeded
    if not ranks.is_zero:  # acts on rank 0's decision, never on the folder as it finds it (ranks.py)
        ranks, start = _await_start(cfg, run_dir, ranks)
        if start.finished is not None:
            log.info("%s", start.finished)
            return {"rank": ranks.rank, "stop_reason": None, "finished": start.finished}
        ckpt = Path(start.checkpoint) if start.checkpoint else None
        plan = plan_for_rank(plan, ranks.rank, ranks.local_rank)
        if not (ranks.via_env and ranks.starts_node):
            return _fit(cfg, run_dir, plan, ckpt, ranks)
        others = start_local_ranks(ranks, cfg.hardware.devices, run_dir, OmegaConf.to_yaml(resolved(cfg)))
        return _fit_beside(others, cfg, run_dir, plan, ckpt, ranks)
    if not ranks.via_env:
        return _train_as_rank_0(cfg, run_dir, plan, ranks, typed)
    from sf_hydra.app import node_store  # torch's TCP store: only for runs on several machines

    rendezvous = env_rendezvous(cfg.hardware.devices, cfg.hardware.num_nodes)
    forget_start(run_dir)  # a token from elsewhere then names no decision in the folder
    ranks = replace(ranks, session=node_store.serve(rendezvous.address, rendezvous.port, cfg.hardware.ddp_timeout_sec))
    try:
        return _train_as_rank_0(cfg, run_dir, plan, ranks)
    finally:
        node_store.release()


def _train_as_rank_0(cfg, run_dir: Path, plan: RunPlan, ranks: Ranks, typed: Sequence[str] = ()) -> dict:
    """Rank 0 (the run folder's lock held) decides how the run starts, picks the layout (hardware.layout=auto: a new
    run of one rank; `typed`, the layout keys the command line typed, are kept), writes the run's config and spaces,
    and trains beside the ranks it starts on this node (or, under Slurm, beside the job's other tasks)."""
    done, ckpt = _decide_start(cfg, run_dir, ranks, model_shapes(plan))
    if done is not None:
        log.info("%s", done[1])
        return done[0]
    if str(cfg.hardware.get("layout", "manual")) == "auto":
        plan = choose_layout(cfg, plan, ckpt, typed)
    warn_more_workers_than_cores(cfg)
    save_config(cfg, run_dir)
    if seal_run(run_dir) is None:  # the code this config names is the user's: enjoy and export load it, no flag
        log.warning("no seal key could be read or made at %s (set SF_HYDRA_HOME to a writable folder): enjoy, "
                    "export and Policy.load will treat this run's own code as from elsewhere (trusted_targets)",
                    key_path())
    rd.save_spaces(run_dir, plan.spaces.observation, plan.spaces.action, plan.spaces.num_agents)  # for Policy.load
    if not ranks.distributed:
        return _fit(cfg, run_dir, plan, ckpt, ranks)
    if ranks.via_slurm:
        return _fit_slurm_rank_0(cfg, run_dir, plan, ckpt, ranks)
    others = start_local_ranks(ranks, cfg.hardware.devices, run_dir, OmegaConf.to_yaml(resolved(cfg)))
    return _fit_beside(others, cfg, run_dir, plan, ckpt, ranks)


def _fit_beside(others: LocalRanks, cfg, run_dir: Path, plan: RunPlan, ckpt: Optional[Path], ranks: Ranks) -> dict:
    """This process (local rank 0 of its node) trains beside the node's other ranks, which it started, and stops
    them with it. A collective broken by another rank's end is reported as that rank's end: one of this node's (its
    exit code, its log), else, for rank 0 of a run on several machines, one on another node (recorded_rank_end)."""
    me = f"learner rank {ranks.rank}" + (f" on node {node_name()}" if ranks.via_env else "")
    try:
        summary = _fit(cfg, run_dir, plan, ckpt, ranks)
    except BaseException as e:
        hung = _from_a_collective(e) and _timed_out(e)  # a rank that still runs answers no collective: no grace
        failure = others.stop(grace_sec=3.0 if hung else 30.0)
        if ranks.via_env and ranks.is_zero and not _own_fault(e) and (
                failure is None or others.hung or never_joined(run_dir, ranks)):
            # a rank of this node that hung in, or timed out of, the process group or a collective waited for one
            # elsewhere, which the records name (a rank that never joined first: the others' ends follow from it)
            failure, _ = recorded_rank_end(run_dir, ranks, cfg.hardware.ddp_timeout_sec, _timed_out(e),
                                           cfg.hardware.devices)
        if failure is not None and not _own_fault(e):  # this error (a collective's) follows from that rank's
            raise RankFailed(f"the run stopped: {failure}") from e
        log.error("%s failed (%s: %s); the other ranks stopped with it", me, type(e).__name__, e)
        raise
    failure = others.stop(grace_sec=cfg.hardware.ddp_timeout_sec + 30.0)
    if failure is not None:
        raise RankFailed(f"the run stopped: {failure}")
    return summary


def _as_recorded_rank(cfg, run_dir: Path, ranks: Ranks) -> dict:
    """Rank r > 0 of a Slurm job or of a run on several machines: its record tells rank 0, which cannot see this
    rank's process, where it runs, where it logs and, when it fails, how (ranks.py record_rank). A Slurm rank
    records itself at once; one on several machines once it knows this start's token (_await_start)."""
    if ranks.via_slurm:
        record_start(run_dir, ranks)
    try:
        return _train_in(cfg, run_dir)
    except BaseException as e:
        what = str(e).strip().splitlines()[0] if str(e).strip() else ""
        record_rank(run_dir, ranks, end=f"{type(e).__name__}: {what}"[:500], collective=_from_a_collective(e))
        raise


def _await_start(cfg, run_dir: Path, ranks: Ranks):
    """(this rank's place with this start's session, rank 0's StartDecision). On several machines without Slurm
    the token of this start comes through rank 0's TCP store (app/node_store.py), the decision it names from the run
    folder, which proves that this rank sees rank 0's run folder; this rank checks that it runs rank 0's config
    (its fingerprint) before it acts on it. Else the decision is read from the run folder (await_start)."""
    timeout = cfg.hardware.ddp_timeout_sec
    if not ranks.via_env:
        return ranks, await_start(run_dir, ranks, timeout)
    from sf_hydra.app import node_store

    who = f"learner rank {ranks.rank} on node {node_name()}"
    rendezvous = env_rendezvous(cfg.hardware.devices, cfg.hardware.num_nodes)
    token = node_store.fetch(rendezvous.address, rendezvous.port, timeout, who)
    decision = sees_run_folder(run_dir, token, who)
    if decision.failed is not None:
        raise RankFailed(f"{who} stops: learner rank 0 could not start the run ({decision.failed})")
    ranks = replace(ranks, session=decision.session)
    same_config(cfg, decision.config, who)
    record_start(run_dir, ranks)
    return ranks, decision


def sees_run_folder(run_dir: Path, session: str, who: str, wait_sec: float = 15.0) -> StartDecision:
    """A rank on another machine reads rank 0's decision of start `session` in the run folder it sees at the same
    path (ranks/start.json), which proves it is rank 0's. RankFailed, naming the run folder and saying a shared
    filesystem is needed, when none is there within `wait_sec` (a network filesystem may show a new file late)."""
    path = run_dir / RANKS_DIR / START
    deadline = time.monotonic() + wait_sec
    while (decision := read_start(path, session)) is None:
        if time.monotonic() >= deadline:
            raise RankFailed(f"{who} does not see learner rank 0's run folder {run_dir} (train_dir={run_dir.parent}): "
                             f"{path} does not hold this start's decision ({session}) after {wait_sec:g} s. A run on "
                             "several machines needs train_dir on a filesystem every machine shares (NFS, Lustre, "
                             "...), at the same path (and MASTER_PORT reachable by its machines alone: a token "
                             "another process wrote there names no decision)")
        time.sleep(0.5)
    return decision


def _fit_slurm_rank_0(cfg, run_dir: Path, plan: RunPlan, ckpt: Optional[Path], ranks: Ranks) -> dict:
    """Rank 0 of a Slurm job trains; a collective broken by another rank's end is reported as that rank's end
    (its node, how it ended, its log: ranks.py recorded_rank_end), rank 0's own failure as rank 0's."""
    try:
        return _fit(cfg, run_dir, plan, ckpt, ranks)
    except BaseException as e:
        if _own_fault(e):
            log.error("learner rank 0 failed (%s: %s); the other ranks stop with it", type(e).__name__, e)
            raise
        ended, lost_node = recorded_rank_end(run_dir, ranks, cfg.hardware.ddp_timeout_sec, _timed_out(e))
        if lost_node is not None:  # a Slurm job is requeued for it (sf_hydra.app.requeue)
            raise NodeLost(f"the run stopped: {ended}", lost_node) from e
        raise RankFailed(f"the run stopped: {ended}") from e


def model_shapes(plan: RunPlan) -> Dict[str, tuple]:
    """{name in the learner's state_dict: shape} of the run's models: what a checkpoint to resume must fit."""
    return {f"policies.{k}.{name}": tuple(t.shape) for k, model in enumerate(plan.initial_policies)
            for name, t in model.state_dict().items()}


def _decide_start(cfg, run_dir: Path, ranks: Ranks, shapes: Dict[str, tuple]):
    """Rank 0 prepares the run folder and decides how the run starts: (finished()'s answer, None) for a run
    that already reached its budget, else (None, the checkpoint to resume or None: the newest one that loads
    and fits the run's models, `shapes`). With several ranks the
    decision, or rank 0's failure to decide, is announced to the others (ranks.py StartDecision)."""
    session = session_of(ranks) if ranks.distributed else None
    try:
        rd.prepare(run_dir, cfg.restart_behavior)
        done = finished(cfg)  # the run already reached a budget: (its summary, what to say)
        ckpt = None if done is not None else rd.resume_checkpoint(run_dir, cfg.load_checkpoint_kind, shapes)
    except BaseException as e:  # ConfigError: kind=best and no best yet; CheckpointError: none loads
        if session is not None:
            _announce(cfg, run_dir, ranks, StartDecision(session, failed=f"{type(e).__name__}: {e}"))
        raise
    if session is not None:
        _announce(cfg, run_dir, ranks, StartDecision(session, str(ckpt) if ckpt else None,
                                                     done[1] if done is not None else None))
    return done, ckpt


def _announce(cfg, run_dir: Path, ranks: Ranks, decision: StartDecision) -> None:
    """Rank 0's decision to <run_dir>/ranks/start.json, and on several machines, with the fingerprint of the config
    rank 0 runs in it, then this start's token to the TCP store: the other machines read the decision it names in
    the run folder; a decision not to train waits until every other machine read the token (up to
    hardware.ddp_timeout_sec)."""
    if ranks.via_env:
        decision = replace(decision, config=config_fingerprint(cfg))
    announce_start(run_dir, decision)
    if ranks.via_env:
        from sf_hydra.app import node_store

        node_store.publish(decision.session)
        if decision.finished is not None or decision.failed is not None:  # no process group will wait for them
            others = cfg.hardware.num_nodes - 1
            read = node_store.await_readers(others, cfg.hardware.ddp_timeout_sec)
            if read < others:
                log.warning("%d of the %d other machines read learner rank 0's decision within "
                            "hardware.ddp_timeout_sec=%g s", read, others, cfg.hardware.ddp_timeout_sec)


def choose_layout(cfg, plan: RunPlan, ckpt: Optional[Path], typed: Sequence[str]) -> RunPlan:
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
    return check_config_against_env(cfg)


def warn_more_workers_than_cores(cfg) -> None:
    """One warning when the run's rollout worker processes outnumber its cores (not in serial mode, where
    no worker has a process of its own)."""
    hw = cfg.hardware
    said = None if hw.serial_mode else more_workers_than_cores(hw.num_workers, hw.num_envs_per_worker, hw.devices)
    if said is not None:
        log.warning("%s", said)


def _own_fault(e: BaseException) -> bool:
    """Whether rank 0 failed for a reason of its own (its sampler, its training, a signal, any error of its own
    code), not because another rank's failure broke a collective: then the other ranks' ends follow from it."""
    from sf_hydra.sampler.sampler import SamplerError  # loaded by the launch already

    own = (SamplerError, NonFiniteTraining, Fault, ConfigError, KeyboardInterrupt, SystemExit)
    return isinstance(e, own) or not _from_a_collective(e)


def _from_a_collective(e: BaseException) -> bool:
    """Whether `e`, or the exception it was raised from, came out of torch.distributed: a collective (or the
    process group under it) that failed or timed out, which is what another rank's end looks like here; a gradient
    all-reduce that failed inside the backward pass says so by its type (learner/ddp.py ReductionFailed)."""
    from sf_hydra.learner.ddp import ReductionFailed  # loaded by training already

    while e is not None:
        if isinstance(e, ReductionFailed) or any(
                f"{os.sep}torch{os.sep}distributed{os.sep}" in frame.f_code.co_filename
                for frame, _ in traceback.walk_tb(e.__traceback__)):
            return True
        e = e.__cause__
    return False


def _timed_out(e: BaseException) -> bool:
    """Whether a collective's error says it timed out (gloo: "Timed out waiting", NCCL: "timeout"), not that a
    rank's connection closed: the ranks still running then hang, and waiting for them to end is in vain."""
    while e is not None:
        if "timed out" in str(e).lower() or "timeout" in str(e).lower():
            return True
        e = e.__cause__
    return False


def resolved(cfg):
    """A copy of `cfg` with every interpolation resolved (what ranks > 0 train with: they have no Hydra)."""
    copy = cfg.copy()
    OmegaConf.resolve(copy)
    return copy


def shown_return(value: Optional[float]) -> str:
    """An average return as the progress lines show it (two decimals), "n/a" before any episode ended."""
    return "n/a" if value is None else f"{value:.2f}"


def _fit(cfg, run_dir: Path, plan: RunPlan, ckpt: Optional[Path], ranks: Ranks) -> dict:
    """Trains this rank's learner with its sampler from `ckpt` (None: a new run); rank 0 writes the summary."""
    from sf_hydra.sampler.sampler import SamplerError  # the sampler's modules: loaded once the checks passed

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
        trainer, stop, checkpoints = build_trainer(cfg, run_dir, resuming=ckpt is not None, ranks=ranks)
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
                "avg_return": module.avg_return()}  # the run's, as every rank holds the same statistics
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
