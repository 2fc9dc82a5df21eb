"""Lightning callbacks that connect the learner to the rest of a run: weight publishing,
stop conditions and signals, progress lines and scalar summaries (to TensorBoard and/or W&B)."""

from __future__ import annotations

import logging
import math
import signal
import time
from typing import Any, Optional

import lightning as L
from lightning.pytorch.loggers import TensorBoardLogger

from sf_hydra.config.schema import LoggerConfig, typed_group
from sf_hydra.core import signals
from sf_hydra.core.door import door_of
from sf_hydra.learner import ddp
from sf_hydra.learner.checkpointing import newest_saved
from sf_hydra.learner.progress import (
    FPS_WINDOWS,
    PROGRESS,
    ConsoleBar,
    FpsMeter,
    ProgressFigures,
    first_budget_eta,
    lag_over_policies,
    least_trained,
    step_budget,
    wants_bar,
)

log = logging.getLogger("sf_hydra")


class PublishPolicy(L.Callback):
    """Before the first batch every policy's weights (a restored checkpoint's, on resume) reach the
    rollout workers, which get their slots only then; after each learner iteration the new weights
    of the policy it trained follow."""

    def on_train_start(self, trainer, pl_module):
        door = door_of(trainer)
        for k, (model, version) in enumerate(zip(pl_module.policies, pl_module.policy_versions)):
            door.publish(k, model, version)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        k = pl_module.last_policy
        with pl_module.profile.part("publish_weights"):
            door_of(trainer).publish(k, pl_module.policies[k], pl_module.policy_versions[k])


class StopConditions(L.Callback):
    """Ends training on the env-step or time budget, or on a stop signal: SIGINT/SIGTERM and,
    in a Slurm job, submitit's preemption signal (core/signals.py). A signal only asks for a
    stop, so the run ends after a whole learner step with a checkpoint; a later one aborts at
    once, except where that would lose work (core/signals.py: a duplicate delivery, a save
    under way). The signals stay caught until the run's final checkpoint is saved (train.py
    calls `signals.release()`). Training time accumulates across resumes. With several policies,
    the budget and the target return hold for each policy (its own env steps and episodes), as Sample
    Factory's train_for_env_steps does."""

    def __init__(self, train_for_env_steps: int, train_for_seconds: float, until_avg_return=None,
                 target_from_evaluation: bool = False):
        """target_from_evaluation (eval.stop_on_eval_return): the target return is the evaluation's to check
        (sf_hydra.evaluation.callback calls `stop`), not the training window's."""
        self.max_steps, self.max_seconds = train_for_env_steps, train_for_seconds
        self.target_return = None if target_from_evaluation else until_avg_return
        self.reason = None
        self._pending = None  # a data-parallel rank's signal: every rank stops once they agree (learner/ddp.py)
        self.start_env_steps = 0  # where this session started (after a resume: the restored count)
        self._last = None
        self._admitted = False

    def stop(self, trainer, reason: str) -> None:
        """Another callback's stop (the evaluation's target return): the run ends after this learner step."""
        self._request(trainer, reason)

    def _request(self, trainer, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        trainer.should_stop = True
        door_of(trainer).request_stop()

    def on_train_start(self, trainer, pl_module):
        self._last = time.monotonic()
        self.start_env_steps = pl_module.env_steps
        # Training takes the signals from the start-up's handler (train.py), and from Lightning's, which
        # took SIGTERM when fit began: a signal received meanwhile stops the run as it starts.
        signals.catch(lambda signum, frame: signals.take(
            signal.Signals(signum), lambda sig: self._stop_for(trainer, sig), newest_saved), new_run=False)
        early = signals.received()
        if early is not None:
            if getattr(trainer, "_signal_connector", None) is not None:
                trainer._signal_connector.received_sigterm = False  # ours to handle: no SIGTERMException
            self._stop_for(trainer, early)

    def _stop_for(self, trainer, sig: signal.Signals) -> None:
        if ddp.world_size() > 1:
            self._pending = f"signal {sig.name}"  # the ranks stop together, after this step (on_train_batch_end)
        else:
            self._request(trainer, f"signal {sig.name}")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not self._admitted:  # the first batch: the sampler's processes all run by now
            signals.admit()
            self._admitted = True
        now = time.monotonic()
        statistics = pl_module.statistics
        statistics.train_seconds += now - self._last
        self._last = now
        reason = self._pending or self._budget_spent(pl_module)
        if ddp.world_size() > 1:  # every rank stops after the same step; the run's training time is rank 0's
            everyone = ddp.gather((reason, statistics.train_seconds))
            reason, statistics.train_seconds = ddp.first_reason([r for r, _ in everyone]), everyone[0][1]
        if reason is not None:
            self._request(trainer, reason)

    def _budget_spent(self, pl_module) -> Optional[str]:
        """Which budget is spent, or None."""
        if min(s.env_steps for s in pl_module.stats) >= self.max_steps:
            return f"train_for_env_steps={self.max_steps} reached"
        if pl_module.train_seconds >= self.max_seconds:
            return f"train_for_seconds={self.max_seconds:g} reached"
        if self.target_return is not None and self._target_reached(pl_module):
            return f"train_until_avg_return={self.target_return:g} reached"
        return None

    def _target_reached(self, m) -> bool:
        """Every policy's full window of episodes averages the target (a finite number)."""
        for s in m.stats:
            ret = s.avg_return()
            if len(s.episode_returns) < s.episode_returns.maxlen or not math.isfinite(ret) or ret < self.target_return:
                return False
        return True

    # The handlers must outlive fit: a signal between the last step and the final save must
    # not reach submitit's handler (requeue and exit) or Python's (KeyboardInterrupt in the
    # save). Lightning puts back the handlers it found when fit began, so the signals wait
    # (held) until train.py catches them again for the save, then releases them.
    def on_train_end(self, trainer, pl_module):
        signals.hold()

    def on_exception(self, trainer, pl_module, exception):
        signals.hold()


class Summaries(L.Callback):
    """Console progress every `log_interval_sec` (lines, or a live bar on a terminal: learner/progress.py),
    scalars to the run's loggers every `experiment_summaries_interval`, both indexed by env steps (frames).
    The progress holds what StopConditions stops on: `budget_steps` is each policy's own env-step budget
    (>= 10^10: none), `budget_seconds` the training time; the policy lag is over every policy; with several
    policies the line names the least-trained one and its env steps of the budget."""

    def __init__(self, logger: Any, budget_steps: Optional[float] = None, budget_seconds: float = math.inf,
                 frameskip: int = 1, with_hyperparams: bool = False):
        """logger: the logger.* group (LoggerConfig, its DictConfig or a mapping of some of its keys): the
        intervals, the progress style and the scalars' x-axis, env frames or agent steps (frames / `frameskip`)
        without logger.summaries_use_frameskip. with_hyperparams: each policy's current hyperparameters are
        written too (PBT changes them)."""
        lg = typed_group(LoggerConfig, logger)
        self.log_interval, self.summaries_interval = lg.log_interval_sec, lg.experiment_summaries_interval
        self.flush_interval = lg.flush_summaries_interval
        self.frames_per_step = 1 if lg.summaries_use_frameskip else max(1, int(frameskip))
        self.with_hyperparams = with_hyperparams
        self.meter = FpsMeter()  # the run's env steps (every policy's, snapshots' too)
        self.least_meter = FpsMeter()  # the least-trained policy's own env steps: the rate toward the budget
        self.style = str(lg.progress)
        self.budget_steps, self.budget_seconds = budget_steps, budget_seconds
        self.bar: Optional[ConsoleBar] = None
        self._last_log = self._last_summary = self._last_bar = 0.0
        self._printed_steps = None  # env steps of the last progress line (the final one is not repeated)

    @property
    def history(self):
        return self.meter.history

    def fps(self, window_sec: float = 10.0) -> float:
        return self.meter.fps(window_sec)

    def on_train_start(self, trainer, pl_module):
        now = time.monotonic()
        self._measure(now, pl_module)
        self._last_log = self._last_summary = now
        if wants_bar(self.style):
            self.bar = ConsoleBar(step_budget(self.budget_steps), self._least(pl_module)[1])

    @staticmethod
    def _least(m):
        """(policy, its own env steps) of the least-trained policy: StopConditions stops on its steps."""
        return least_trained([s.env_steps for s in m.stats])

    def _measure(self, now: float, m) -> None:
        self.meter.add(now, m.env_steps)
        self.least_meter.add(now, self._least(m)[1])

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        with pl_module.profile.part("summaries"):
            self._report(trainer, pl_module)

    def _report(self, trainer, pl_module) -> None:
        now = time.monotonic()
        self._measure(now, pl_module)
        if now - self._last_summary >= self.summaries_interval:
            self._last_summary = now
            self._write_scalars(trainer, pl_module)
        if now - self._last_log >= self.log_interval:
            self._last_log = now
            self._print_progress(pl_module)
        if self.bar is not None and now - self._last_bar >= 0.5:
            self._last_bar = now
            self.bar.show(self.figures(pl_module))

    def on_train_end(self, trainer, pl_module):
        self._write_scalars(trainer, pl_module)
        if pl_module.env_steps != self._printed_steps:
            self._print_progress(pl_module)
        self._close_bar(pl_module)

    def on_exception(self, trainer, pl_module, exception):
        self._close_bar(pl_module)

    def _close_bar(self, m) -> None:
        if self.bar is not None:
            self.bar.show(self.figures(m))
            self.bar.close()
            self.bar = None

    def figures(self, m) -> ProgressFigures:
        """The progress now. The ETA is the first budget's to end: train_for_seconds, or the env-step budget
        (each policy's own steps) at the least-trained policy's own rate over the last 60 s."""
        fps = {w: self.fps(w) for w in FPS_WINDOWS}
        budget = step_budget(self.budget_steps)
        least_policy, least_steps = self._least(m)
        eta = first_budget_eta(least_steps, budget, self.least_meter.fps(60), m.train_seconds, self.budget_seconds,
                               len(m.stats))
        lag_avg, lag_max = lag_over_policies([s.metrics for s in m.stats])
        return ProgressFigures(m.env_steps, budget, fps, m.avg_return(), m.episodes_total, lag_avg, lag_max,
                               m.policy_version, eta, len(m.stats), least_policy, least_steps)

    def _print_progress(self, m) -> None:
        self._printed_steps = m.env_steps
        log.info("%s", self.figures(m).line(), extra=PROGRESS)
        if len(m.stats) > 1:
            log.info("policies: %s", " | ".join(
                f"{k}: {s.env_steps} steps, return {'n/a' if s.avg_return() is None else f'{s.avg_return():.2f}'}, "
                f"version {s.version}" for k, s in enumerate(m.stats)), extra=PROGRESS)

    def _write_scalars(self, trainer, m) -> None:
        if trainer.logger is None:
            return
        step = m.env_steps // self.frames_per_step
        scalars = dict(m.statistics.last_metrics)
        for k, stats in enumerate(m.stats):  # one policy: its tags unprefixed; several: policy_<k>/...
            prefix = "" if len(m.stats) == 1 else f"policy_{k}/"
            per_policy = {**stats.metrics, **stats.outcome_rates()}
            per_policy.update({f"episode/{name}": v for name, v in stats.avg_extra().items()})
            if self.with_hyperparams:  # each policy's current hyperparameters
                per_policy.update({f"pbt/{name}": v for name, v in m.hyperparams[k].items()})
            if len(m.stats) > 1:
                per_policy["perf/env_steps"] = float(stats.env_steps)
                if stats.episode_returns:
                    per_policy.update({"episode/return": stats.avg_return(), "episode/length": stats.avg_length()})
            scalars.update({prefix + tag: value for tag, value in per_policy.items()})
        scalars["perf/fps"] = self.fps()
        scalars["perf/env_steps"] = float(m.env_steps)
        scalars["perf/train_seconds"] = m.train_seconds
        if m.statistics.episode_returns:
            scalars["episode/return"] = m.avg_return()
            scalars["episode/length"] = m.avg_length()
        for agent, stats in m.statistics.avg_agent_stats().items():  # multi-agent envs: each agent besides the pool
            scalars[f"episode/agent_{agent}/return"] = stats["return"]
            scalars[f"episode/agent_{agent}/length"] = stats["length"]
        send_scalars(trainer.loggers, scalars, step, self.flush_interval)


def send_scalars(loggers, scalars: dict, step: int, flush_every: float = 0.0) -> None:
    """The same scalars, indexed by `step`, to every logger of the run (TensorBoard, W&B). The
    TensorBoard file is flushed when `flush_every` seconds passed since its last flush (0: always)."""
    now = time.monotonic()
    for logger in loggers:
        logger.log_metrics(scalars, step)
        if isinstance(logger, TensorBoardLogger) and now - getattr(logger, "_sf_flushed", -1e18) >= flush_every:
            logger.experiment.flush()  # on disk now, for a reader while the run goes on
            logger._sf_flushed = now
