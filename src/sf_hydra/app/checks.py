"""Every check of a launch, as one ordered list of stages (docs/validation.md: where a new rule goes).

Each stage owns its inputs: a rule belongs to the first stage that has everything it reads. Each
refuses with ConfigError(key, value, allowed), before any process starts and before anything is
written into the run folder.

    schema       the command line: override syntax, key names, types, Enum values, `+key=` additions,
                 group options, env names, launcher packages, a creatable train_dir   (sf_hydra.app.bad_input)
    resume       a run that resumes: its saved config.yaml is the base, the overrides typed now are applied,
                 those a resume may not take are refused, all at once              (sf_hydra.app.resume_config)
    config       the config's own values, key against key                  (sf_hydra.config.validate)
    targets      every `_target_`: a dotted path that imports              (sf_hydra.core.targets)
    family       what the env family declares, without building an env: its node's rules, its episode
                 statistics and reward shaping (PBT), its vector backends
    run folder   the run folder: creatable, and a resumed config differs from the saved one only in what a
                 resume may change (sf_hydra.app.resume_config)
    env          one env build (or hardware.use_env_info_cache): the agent count, the spaces, a model
                 built for them and the losses (checked_plan; returns the EnvInfo)

A launch runs each stage once and composes its config once. `python train.py` runs schema to run
folder in `check_command_line`, before Hydra writes anything (`.hydra/`, `train.log` in the run
folder); Hydra then runs the job on that compose (sf_hydra.app.cli), and train() skips the stages that
passed for the config it trains (`Checked`). A sweep's jobs are composed by Hydra's sweeper, and
train(cfg) called with such a config runs every stage but the schema, which Hydra's compose applied.
The env stage runs in train, where its EnvInfo is used.

This module is on the refusal path of the command line, which stays light (no torch, no Lightning:
tests/config/test_refusal_is_light.py): a stage that needs the layers above sf_hydra.config imports
them when it runs, after the config's own rules passed.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Tuple

from omegaconf import DictConfig, OmegaConf, open_dict

from sf_hydra.app.bad_input import check_creatable, compose_job, resume_command_line
from sf_hydra.app.help import prog
from sf_hydra.app.resume_config import (
    CONFIG,
    _shown,
    check_resume_config,
    config_differences,
    has_run_to_resume,
    load_checked,
)
from sf_hydra.app.topology.start import FINISHED, RunStart, look
from sf_hydra.app.trainer_parts import check_parts, without_parts
from sf_hydra.config import ConfigError, validate
from sf_hydra.config.validation import check_pbt_against_env, eval_env
from sf_hydra.core.faults import EnvStartError
from sf_hydra.core.metric_names import eval_on
from sf_hydra.core.run_dir import held_by_another
from sf_hydra.core.targets import check_targets

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage:
    name: str
    owns: str  # what its rules read; a rule that needs more belongs to a later stage
    # raises ConfigError; schema: (argv, config_dir) -> cfg; resume: (argv, config_dir, cfg) -> cfg; others: (cfg)
    check: Callable


def check_all_targets(cfg) -> None:
    """Every `_target_`: the Lightning parts' (trainer, callbacks, logger.extra) without importing
    Lightning (sf_hydra.app.trainer_parts.check_parts), every other by import (sf_hydra.core.targets)."""
    check_targets(without_parts(cfg))
    check_parts(cfg)


def check_family(cfg) -> None:
    """The env family's own rules, from its code and declarations; no env is built."""
    # Imported here, not above: env families import numpy and gymnasium, the sampler's module torch, and a
    # refusal by an earlier stage stays light.
    from sf_hydra.envs import check_env, episode_stats, reward_shaping
    from sf_hydra.sampler.vector_envs import check_batched_sampling

    check_env(cfg.env)
    check_pbt_against_env(cfg, episode_stats(cfg.env), reward_shaping(cfg.env))
    check_batched_sampling(cfg)
    check_eval_env(cfg)


def check_eval_env(cfg) -> None:
    """With eval.env_overrides: the family's own rules hold for the evaluation's env node too (a Doom skill
    out of its range, a map the family refuses), named as eval.env_overrides.<key>; with eval.video_every,
    the video format can be written here."""
    from sf_hydra.envs import check_env

    overrides = OmegaConf.to_container(cfg.eval.env_overrides, resolve=True)
    if overrides:
        try:
            check_env(eval_env(cfg.env, overrides))
        except ConfigError as e:
            key = e.key[len("env."):] if e.key.startswith("env.") else e.key
            if key in overrides:
                raise ConfigError(f"eval.env_overrides.{key}", e.value, e.allowed) from None
            raise ConfigError("eval.env_overrides", overrides, f"overrides that the env family accepts: {e}") from None
    if cfg.eval.video_every > 0:
        from sf_hydra.evaluation.episodes import eval_video_format  # no Lightning: the episode code only

        eval_video_format(cfg.eval.video_format, cfg.eval.video_every)


def check_run_folder(cfg) -> None:
    """The run folder can be created and, when the run resumes, the config is the one it was saved with; a
    folder whose run cannot be resumed is not started anew over unasked (check_saved_run_without_checkpoint)."""
    run_dir = Path(cfg.run_dir).absolute()
    check_creatable("train_dir" if OmegaConf.is_interpolation(cfg, "run_dir") else "run_dir", cfg.run_dir)
    check_resume_config(cfg, run_dir)  # reads the folder's config.yaml; writes nothing
    check_saved_run_without_checkpoint(cfg, run_dir)


def check_saved_run_without_checkpoint(cfg, run_dir: Path) -> None:
    """ConfigError naming restart_behavior when `cfg` would resume (restart_behavior=resume) a folder that holds
    a saved config.yaml but no checkpoint (checkpoints/ deleted or emptied) and starting anew there would lose or
    change its run unseen: a session of it ended (its summary.json: a session that ends saves a checkpoint
    first, so its checkpoints were removed since), or the config composed now differs from the saved one in
    what a resume keeps (the saved config would be replaced). A run killed before its first checkpoint and run
    again with its own command (a Slurm requeue after a lost node) starts anew as it always did, and so does a
    benchmark's folder (a benchmark saves no checkpoint). Reads the folder; writes nothing."""
    if str(cfg.restart_behavior) != "resume" or not (run_dir / CONFIG).is_file() or has_run_to_resume(run_dir):
        return
    if held_by_another(run_dir):  # a live run has not saved its first checkpoint yet: the lock says it is in use
        return
    saved = load_checked(cfg, run_dir)
    if OmegaConf.select(saved, "benchmark", default=False):
        return
    ended = _ended_session(run_dir)
    refused = config_differences(cfg, saved)[0]
    if ended is None and not refused:
        return
    if ended is not None:
        what = f"the config.yaml of a run whose last session ended at {ended} env steps (its summary.json)"
    else:
        shown = "; ".join(f"{k}={_shown(a)!r} (saved: {_shown(b)!r})" for k, a, b in refused[:4])
        what = f"a saved config.yaml that differs from this command's ({shown}{' ...' if len(refused) > 4 else ''})"
    raise ConfigError("restart_behavior", str(cfg.restart_behavior), (
        f"restart or overwrite: {run_dir} holds {what}, but no checkpoint to resume it from "
        f"({run_dir / 'checkpoints'} is gone or empty). restart_behavior=restart moves that run's files "
        f"(config.yaml, tb/, summary.json, ...) aside to {run_dir.name}_old_<date>_<time>/ and starts anew; "
        "restart_behavior=overwrite deletes them and starts anew; experiment=<name> starts a new run in its own "
        "folder"))


def _ended_session(run_dir: Path) -> Optional[object]:
    """The env steps in the folder's summary.json (written when a session ends), "?" when it cannot be read;
    None when there is none."""
    path = run_dir / "summary.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text()).get("env_steps", "?")
    except (ValueError, AttributeError):
        return "?"


def checked_plan(cfg):
    """The run's plan (sf_hydra/plan.py), built once the rules that need the env's spaces pass: those read
    from one env build (or hardware.use_env_info_cache), the plan built for them from the run's seed: its
    policies are the learner's initial models, its trajectory spec the one the loss rules read. Raises
    ConfigError before any process starts and before the run folder is touched (restart_behavior=overwrite
    must not delete a run for a bad key). Seeds torch, numpy and random with `seed` first. Returns the plan."""
    # Imported here, not above: torch and the env, model and learner code; a refusal by an earlier stage
    # (the command line's, before Hydra) imports none of them.
    import torch

    from sf_hydra.core.seeding import seed_everything
    from sf_hydra.learner.loss_rules import check_losses_apply
    from sf_hydra.models.actor_critic import check_model_for_env
    from sf_hydra.plan import plan_run
    from sf_hydra.sampler.env_info import env_info
    from sf_hydra.sampler.sampler import check_sampling_options

    try:
        env = env_info(cfg)  # one env build (or the cache): its spaces and agent count
    except ConfigError:
        raise  # an env key the env's own checks refuse (env.downsample=0): a bad config, not a crash
    except Exception as e:
        raise EnvStartError(cfg.env, e) from e
    check_eval_env_builds(cfg, env)  # eval.env_overrides: the family builds them, with the training env's spaces
    check_sampling_options(cfg, env.num_agents)  # the rules that need the agent count
    check_model_for_env(cfg, env.observation_space, env.action_space)  # the rules that need the spaces
    torch.set_num_threads(cfg.hardware.torch_threads)
    # reproducible: an op without a deterministic kernel raises rather than runs (set either way: one process may
    # train several runs, e.g. the tests). Only when it changes: the first call costs ~1.1 s here (torch loads
    # its deterministic-kernel machinery), on the start-up's critical path.
    deterministic = bool(cfg.hardware.reproducible)
    if torch.are_deterministic_algorithms_enabled() != deterministic:
        torch.use_deterministic_algorithms(deterministic)
    seed_everything(cfg.seed)
    plan = plan_run(cfg, env)  # the learner's initial policies, from the seeded random state
    check_losses_apply(cfg.algo, env.action_space, plan.spec)  # symmetric_kl, kl_loss_coeff: the spaces, the model
    return plan


def check_eval_env_builds(cfg, env) -> None:
    """With eval.env_overrides (and evaluation on): one evaluation env is built, as the evaluation process
    will build it, and its spaces and agent count are the training env's (`env`, an EnvInfo): the trained
    policies must be able to play it. ConfigError naming eval.env_overrides otherwise."""
    overrides = OmegaConf.to_container(cfg.eval.env_overrides, resolve=True)
    if not overrides or not eval_on(cfg.eval):
        return
    from sf_hydra.sampler.env_info import describe_env  # the env stage's imports: torch, the env family

    try:
        got = describe_env(eval_env(cfg.env, overrides))
    except ConfigError as e:
        raise ConfigError("eval.env_overrides", overrides, f"overrides the env family builds: {e}") from None
    except Exception as e:  # noqa: BLE001 (the family's own error, named with the key that caused it)
        raise ConfigError("eval.env_overrides", overrides, "overrides the env family builds; building the evaluation "
                          f"env failed: {type(e).__name__}: {' '.join(str(e).split())[:300]}") from None
    if tuple(got) != tuple(env):
        raise ConfigError("eval.env_overrides", overrides, "overrides that keep the training env's spaces and agents "
                          f"(the trained policies play it): training {tuple(env)}, evaluation {tuple(got)}")


STAGES: Tuple[Stage, ...] = (
    Stage("schema", "the command line, as Hydra composes it", compose_job),  # Hydra's node kept: the job's config
    # (argv, config_dir, cfg) -> the config to train: a resumed run's saved config with the overrides typed now
    Stage("resume", "the run folder's saved config.yaml, the overrides typed now", resume_command_line),
    Stage("config", "the composed config's values", validate),
    Stage("targets", "every _target_ (dotted path) in the config", check_all_targets),
    Stage("family", "the env family's code and declarations (no env built)", check_family),
    Stage("run folder", "run_dir on disk: its parent, its saved config.yaml", check_run_folder),
    Stage("env", "one env's spaces and agent count; the run's plan (its policies, spec) built for them",
          checked_plan),
)
STAGE = {stage.name: stage for stage in STAGES}
# What runs on a composed config before the run folder is locked; the env stage runs in train() after it.
BEFORE_START = ("config", "targets", "family", "run folder")


@dataclass(frozen=True)
class Checked:
    """The stages that passed for one config in this process (the command line's checks, before Hydra runs
    the job): train() runs only the others when it trains that config. `cfg` is the config the run trains with
    (a resumed run's: its saved config with the overrides typed now); `job`, the command line as composed, with
    Hydra's node: the config Hydra runs the job on (sf_hydra.app.cli run_job), so it is composed once."""
    cfg: DictConfig
    stages: Tuple[str, ...]
    job: Optional[DictConfig] = None
    start: Optional[RunStart] = None  # what the run folder said before Hydra wrote into it (topology/start.py look)

    def passed_for(self, cfg: DictConfig) -> Tuple[str, ...]:
        """The stages that passed for `cfg`: those of this check when `cfg` is its config, else none."""
        return self.stages if cfg is self.cfg else ()


def _stage(name: str) -> Stage:
    return next(stage for stage in STAGES if stage.name == name)


def run_stages(cfg, names: Sequence[str], skip: Sequence[str] = ()) -> Any:
    """Runs the named stages on `cfg` in STAGES' order, except those in `skip`; returns the last one's result."""
    result = None
    for stage in STAGES:
        if stage.name in names and stage.name not in skip:
            result = stage.check(cfg)
    return result


def check_config(cfg) -> None:
    """The stages that need only the config, not the run folder or an env: config, targets, family."""
    run_stages(cfg, ("config", "targets", "family"))


def check_before_start(cfg, checked: Optional[Checked] = None) -> None:
    """What train() runs before it locks the run folder: BEFORE_START's stages, except those `checked`
    records as passed for `cfg` (the command line's checks in this process)."""
    skip = checked.passed_for(cfg) if checked is not None else ()
    run_stages(cfg, BEFORE_START, skip)


def check_command_line(argv: Sequence[str], config_dir: str, rules_passed: Optional[Callable[[], Any]] = None,
                       looks: Callable[[DictConfig], bool] = lambda cfg: True) -> Optional[Checked]:
    """Every stage that can run before Hydra, on train.py's command line (`argv`, Hydra's arguments).
    None when Hydra only shows something (--help, --cfg) or in --multirun (the keys only: each run's values
    are checked in its own job); for a single run, what passed. `rules_passed`: called once the config's
    own rules passed, before the stages that import torch and the envs (train.py starts the sampler's fork
    server there); its failure only costs that head start. A resumed run that already reached its budget
    gives a Checked whose `start` says so, with no stage run after the config stage; one that resumes, a
    Checked whose `start` says what it continues (read before Hydra rewrites the folder's .hydra/). `looks`:
    whether this process may look at the run folder for the run's start (global rank 0)."""
    job = _stage("schema").check(argv, config_dir)
    if job is None:
        return None
    cfg = copy.deepcopy(job)
    with open_dict(cfg):
        cfg.pop("hydra")  # the task function's config, as Hydra hands it over
    cfg = _stage("resume").check(argv, config_dir, cfg)  # a resumed run's saved config is its base
    run_stages(cfg, ("config",))  # an invalid value is refused even where the run has nothing left to train
    start = look(cfg, prog("train.py")) if looks(cfg) else None
    if start is not None and start.kind == FINISHED:  # nothing to train: said at once, no other stage run
        return Checked(cfg, ("config",), job, start=start)
    if rules_passed is not None:
        try:
            rules_passed()
        except Exception as e:  # a start-up speed-up only: its failure must not skip the stages below
            log.warning("could not start early (%s: %s); the run starts without it", type(e).__name__, e)
    run_stages(cfg, ("targets", "family", "run folder"))
    return Checked(cfg, BEFORE_START, job, start=start)
