"""The learner's side of evaluation during training: a Lightning callback that starts the evaluation process
(sf_hydra.evaluation.process) when training starts, hands it each trained policy's current weights on the
schedule (`every_env_steps` of the run's env steps, `every_sec` seconds of training: whichever comes first),
and turns each answer into eval/* scalars (TensorBoard, W&B), a best checkpoint when `save_best_metric` is an
eval/ metric, PBT's objective when `pbt.target_objective=eval/return`, and a stop when `stop_on_eval_return`
and every policy's evaluation reached `target_return`.

Invariants:
- One evaluation at a time: weights go into the evaluation's own stores only while no request is pending
  (the process reads them at the start of a request); a schedule point that passes while one runs is
  served when it ends (several such points: one evaluation).
- The learner never waits for the evaluation, except at the end of training: for the one in flight and
  for one more when a schedule point passed (each at most `final_wait_sec`), so that every point the run
  passed is evaluated and logged.
- Scalars are indexed like Summaries' (env frames, or agent steps without logger.summaries_use_frameskip),
  at the env steps where the weights were taken.
- A failure of the evaluation process ends the evaluation (an error in the log), never the training.
- Its state (evaluations done, the next scheduled env steps) is saved in checkpoints: a resumed run goes on
  with the schedule and the evaluation count.
"""

from __future__ import annotations

import logging
import os
import queue
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import lightning as L
from omegaconf import OmegaConf

from sf_hydra.config.schema import EvalConfig, typed_group
from sf_hydra.core.metric_names import EVAL_LENGTH, EVAL_RETURN, eval_on
from sf_hydra.evaluation.episodes import eval_video_format
from sf_hydra.evaluation.process import EvalFailed, EvalRequest, EvalSettings, eval_process_main
from sf_hydra.learner.callbacks import StopConditions, send_scalars
from sf_hydra.learner.checkpointing import PeriodicCheckpoint
from sf_hydra.learner.pbt import PopulationBasedTraining
from sf_hydra.models.recipe import model_recipe, plain
from sf_hydra.sampler import mp
from sf_hydra.sampler.policy_store import PolicyStore

log = logging.getLogger("sf_hydra")

EVAL_VALUES = {EVAL_RETURN: "return", EVAL_LENGTH: "length"}  # metric name -> a policy's record key


def eval_scalars(record: dict) -> Dict[str, float]:
    """The TensorBoard/W&B scalars of one evaluation record: eval/return, eval/return_std, eval/length
    (one policy), or eval/policy_<k>/... (several), and eval/seconds."""
    policies = record["policies"]
    out = {"eval/seconds": float(record["seconds"])}
    for p in policies:
        prefix = "eval/" if len(policies) == 1 else f"eval/policy_{p['policy']}/"
        out.update({f"{prefix}return": p["return"], f"{prefix}return_std": p["return_std"],
                    f"{prefix}length": p["length"]})
    return out


class Evaluation(L.Callback):
    """Evaluation on a schedule (eval.*): off (does nothing, starts no process) while `every_env_steps` and
    `every_sec` are both 0."""

    def __init__(self, eval: Any, run_dir: str, seed: Optional[int], target_return: Optional[float] = None,
                 use_frameskip: bool = True, frameskip: int = 1, final_wait_sec: float = 120.0):
        """eval: the eval.* group (EvalConfig, its DictConfig or a mapping of some of its keys); target_return:
        train_until_avg_return, the target of eval.stop_on_eval_return."""
        ev = typed_group(EvalConfig, eval)
        self.run_dir, self.seed = Path(run_dir), seed
        self.every_env_steps, self.every_sec = int(ev.every_env_steps), float(ev.every_sec)
        self.episodes, self.deterministic, self.max_episode_steps = ev.episodes, ev.deterministic, ev.max_episode_steps
        self.env_overrides = plain(ev.env_overrides) if ev.env_overrides is not None else {}
        self.video_every, self.video_format, self.video_frames = ev.video_every, str(ev.video_format), ev.video_frames
        self.target_return = target_return if ev.stop_on_eval_return else None
        self.frames_per_step = 1 if use_frameskip else max(1, int(frameskip))
        self.final_wait_sec = final_wait_sec
        self.evaluations = 0  # requests sent (across resumes)
        self.next_env_steps = self.every_env_steps  # the next scheduled evaluation by env steps
        self.latest: Dict[int, dict] = {}  # policy -> its part of the latest record
        self.records: List[dict] = []  # this session's records, in order
        self._process = None
        self._pending: Optional[EvalRequest] = None
        self._keep_weights = False  # save_best_metric is an eval/ metric: the best file gets the evaluated weights
        self._evaluated_weights: List[dict] = []  # per policy, a copy of the weights the pending evaluation plays
        self._last_start = time.monotonic()

    @property
    def on(self) -> bool:
        return eval_on(self)

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"evaluations": self.evaluations, "next_env_steps": self.next_env_steps}

    def load_state_dict(self, state_dict: dict) -> None:
        self.evaluations = int(state_dict.get("evaluations", 0))
        self.next_env_steps = int(state_dict.get("next_env_steps", self.every_env_steps))

    # -- life cycle ----------------------------------------------------------------------------
    def on_train_start(self, trainer, pl_module):
        if not self.on:
            return
        self._last_start = time.monotonic()
        if self.every_env_steps > 0 and self.next_env_steps <= pl_module.env_steps:  # a resume, or a new schedule
            self.next_env_steps = (pl_module.env_steps // self.every_env_steps + 1) * self.every_env_steps
        self._stores = [PolicyStore(model) for model in pl_module.policies]
        for cb in trainer.callbacks:  # pbt.target_objective=eval/return ranks by the latest evaluations
            if isinstance(cb, PopulationBasedTraining):
                cb.eval_objective = self.latest_value
        self._keep_weights = any(isinstance(cb, PeriodicCheckpoint) and cb.best is not None
                                 and cb.best.metric in EVAL_VALUES for cb in trainer.callbacks)
        self._start_process(self._settings(len(pl_module.policies)))

    def latest_value(self, policy: int, metric: str) -> Optional[float]:
        """`metric` (eval/return, eval/length) of the policy's latest evaluation; None before its first."""
        latest = self.latest.get(policy)
        return None if latest is None or metric not in EVAL_VALUES else float(latest[EVAL_VALUES[metric]])

    def _settings(self, num_policies: int) -> EvalSettings:
        """From the run's saved config (train.py saves it before training starts), as enjoy.py reads it."""
        cfg = OmegaConf.load(self.run_dir / "config.yaml")
        if self.env_overrides:
            cfg.env = OmegaConf.merge(cfg.env, self.env_overrides)
        return EvalSettings(
            run_dir=str(self.run_dir), seed=self.seed, num_policies=num_policies, episodes=self.episodes,
            deterministic=self.deterministic, max_episode_steps=self.max_episode_steps,
            video_every=self.video_every, video_format=eval_video_format(self.video_format, self.video_every),
            video_frames=self.video_frames, env=plain(cfg.env), model=model_recipe(cfg),
        )

    def _start_process(self, settings: EvalSettings) -> None:
        ctx = mp.context()
        self._requests, self._results = ctx.Queue(), ctx.Queue()
        args = (settings, self._stores, self._requests, self._results, os.getpid(), mp.parent_state())
        self._process = ctx.Process(target=eval_process_main, args=args, name="evaluation", daemon=True)
        self._process.start()
        log.info("evaluation process started: %d episodes per policy every %s (results in %s)", self.episodes,
                 " or ".join(w for w in (f"{self.every_env_steps} env steps" if self.every_env_steps else "",
                                         f"{self.every_sec:g} s" if self.every_sec else "") if w),
                 self.run_dir / "eval")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self._process is None:
            return
        with pl_module.profile.part("evaluation"):
            self._collect(trainer, pl_module, block=False)
            if self._pending is None and self._due(pl_module.env_steps):
                self._request(pl_module)

    def _due(self, env_steps: int) -> bool:
        by_steps = self.every_env_steps > 0 and env_steps >= self.next_env_steps
        by_time = self.every_sec > 0 and time.monotonic() - self._last_start >= self.every_sec
        return by_steps or by_time

    def _request(self, m) -> None:
        """The current weights of every policy into the evaluation's stores, and a request for them."""
        for k, (model, version) in enumerate(zip(m.policies, m.policy_versions)):
            self._stores[k].publish(model, version)
        if self._keep_weights:  # what a best checkpoint by this evaluation must hold (training goes on meanwhile)
            self._evaluated_weights = [{name: t.detach().clone() for name, t in model.state_dict().items()}
                                       for model in m.policies]
        self._pending = EvalRequest(self.evaluations, int(m.env_steps), [int(s.env_steps) for s in m.stats],
                                    [int(v) for v in m.policy_versions])
        self._requests.put(self._pending)
        self.evaluations += 1
        self._last_start = time.monotonic()
        if self.every_env_steps > 0:
            self.next_env_steps = (m.env_steps // self.every_env_steps + 1) * self.every_env_steps

    def _collect(self, trainer, m, block: bool, timeout: float = 0.0) -> None:
        """The pending evaluation's answer, if it came (waiting up to `timeout` with `block`)."""
        if self._pending is None:
            return
        try:
            answer = self._results.get(timeout=timeout) if block else self._results.get_nowait()
        except queue.Empty:
            if not self._process.is_alive():
                self._give_up(f"it died (exit code {self._process.exitcode})")
            return
        self._pending = None
        if isinstance(answer, EvalFailed):
            self._give_up(f"it failed:\n{answer.traceback}")
            return
        self._use(trainer, m, answer)

    def _give_up(self, why: str) -> None:
        """A failed evaluation ends the evaluation, not the training (one error in the log)."""
        log.error("evaluation during training is off for the rest of this session: the evaluation process %s", why)
        self._stop_process()

    def _use(self, trainer, m, record: dict) -> None:
        self.records.append(record)
        for p in record["policies"]:
            self.latest[p["policy"]] = p
        step = record["env_steps"] // self.frames_per_step
        send_scalars(trainer.loggers, eval_scalars(record), step)
        if record.get("video"):
            self._log_video(trainer, record["video"], step)
        log.info("evaluation %d at %d env steps (%.1f s): %s", record["evaluation"], record["env_steps"],
                 record["seconds"], " | ".join(f"policy {p['policy']}: return {p['return']:.2f} +- "
                                               f"{p['return_std']:.2f}, length {p['length']:.1f}"
                                               for p in record["policies"]))
        self._offer_best(trainer, m, record)
        self._check_target(trainer, record)

    def _offer_best(self, trainer, m, record: dict) -> None:
        """With save_best_metric=eval/*: each policy's value to the best checkpoints (learner/checkpointing)."""
        for cb in trainer.callbacks:
            best = getattr(cb, "best", None) if isinstance(cb, PeriodicCheckpoint) else None
            if best is None or best.metric not in EVAL_VALUES:
                continue
            for p in record["policies"]:
                k = p["policy"]
                weights = self._evaluated_weights[k] if k < len(self._evaluated_weights) else None
                best.offer(trainer, m, k, p[EVAL_VALUES[best.metric]], record["env_steps"], weights, p["version"])

    def _check_target(self, trainer, record: dict) -> None:
        if self.target_return is None or any(p["return"] < self.target_return for p in record["policies"]):
            return
        for cb in trainer.callbacks:
            if isinstance(cb, StopConditions):
                cb.stop(trainer, f"train_until_avg_return={self.target_return:g} reached by evaluation "
                                 f"{record['evaluation']} (eval.stop_on_eval_return)")

    @staticmethod
    def _log_video(trainer, path: str, step: int) -> None:
        for logger in trainer.loggers:
            if type(logger).__name__ == "WandbLogger":
                try:
                    logger.log_video("eval/video", [path], step=step)
                except Exception as e:  # noqa: BLE001 (a video W&B refuses stays on disk: a warning)
                    log.warning("W&B: the evaluation video stays in %s (%s: %s)", path, type(e).__name__, e)

    def on_train_end(self, trainer, pl_module):
        if self._process is None:
            return
        self._wait(trainer, pl_module)
        if self._pending is None and self._due(pl_module.env_steps):
            self._request(pl_module)
            self._wait(trainer, pl_module)
        self._stop_process()

    def _wait(self, trainer, m) -> None:
        if self._pending is not None:
            self._collect(trainer, m, block=True, timeout=self.final_wait_sec)
            if self._pending is not None:
                log.warning("the evaluation in flight did not end within %.0f s: its result is lost",
                            self.final_wait_sec)

    def on_exception(self, trainer, pl_module, exception):
        self._stop_process()

    def _stop_process(self) -> None:
        if self._process is None:
            return
        self._requests.put(None)
        self._process.join(timeout=10.0)
        if self._process.is_alive():
            log.warning("the evaluation process did not stop in time: killing it")
            self._process.kill()
            self._process.join(timeout=5.0)
        self._process, self._pending = None, None
