"""Hydra entry points (`train.py` at the repo root and the `sf-train` console script, `enjoy.py` and
`sf-enjoy`). Importing this module defines them and does nothing else: the configs are found, the schema
registered and the command line rewritten (once) when an entry point runs."""

from __future__ import annotations

import atexit
import functools
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Callable, List, Optional, Sequence

import hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict

from sf_hydra.app.bad_input import hydra_for
from sf_hydra.app.checks import Checked, check_command_line
from sf_hydra.app.help import help_request, print_enjoy_help, print_help, prog
from sf_hydra.app.layout import typed_layout_keys
from sf_hydra.app.objective import sweep_score
from sf_hydra.app.resume_config import resumed_config
from sf_hydra.app.sample_factory.translate import sf_command_line
from sf_hydra.app.topology import choose
from sf_hydra.app.topology.start import FINISHED, RESUME
from sf_hydra.app.topology.torchrun import worker_overrides
from sf_hydra.config import ConfigError, register_configs
from sf_hydra.config.aliases import apply_aliases
from sf_hydra.config.location import find_configs
from sf_hydra.config.sweep_folders import is_multirun, sweep_overrides, with_overrides
from sf_hydra.core import signals
from sf_hydra.core.faults import EXIT_BAD_CONFIG, Fault, NonFiniteTraining
from sf_hydra.core.run_dir import RunLock
from sf_hydra.sampler import mp

log = logging.getLogger("sf_hydra")


def __getattr__(name: str):
    """CONFIG_PATH and CONFIG_DIR (find_configs), found when first read rather than when this module is imported."""
    if name in ("CONFIG_PATH", "CONFIG_DIR"):
        return find_configs()[name == "CONFIG_DIR"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def train_task(checked: Optional[Checked]) -> Callable[[DictConfig], float]:
    """The task function Hydra runs for train.py. `checked`: the command line's checks of a single run, whose
    config (a resumed run's saved one with the overrides typed now) is the one trained, with the stages that
    passed for it not run again; None in a sweep (each job composed by Hydra's sweeper: the resume stage here)."""

    def task(cfg: DictConfig) -> float:
        # Imported here, not above: torch and Lightning, which a refused command line never imports (the
        # sampler's fork server imports them meanwhile, started once the config's own rules passed).
        from sf_hydra.app.train import train
        from sf_hydra.sampler.sampler import SamplerError

        in_sweep = use_sweep_folder(cfg)
        try:
            typed = list(HydraConfig.get().overrides.task)
            cfg = checked.cfg if checked is not None else resumed_config(cfg, typed, JobComposer())
            summary = train(cfg, checked, typed=typed_layout_keys(typed))
        except (ConfigError, SamplerError, NonFiniteTraining, Fault) as e:
            log.error("%s%s", "bad config: " if isinstance(e, ConfigError) else "", e)
            if in_sweep:
                raise  # Hydra records this run as failed, runs the others, then reports it
            sys.exit(EXIT_BAD_CONFIG if isinstance(e, ConfigError) else getattr(e, "exit_code", 1))
        if signals.received() is not None and not in_sweep:
            sys.exit(128 + signals.received())  # this session was stopped (with a checkpoint) by that signal
        # Sweepers (e.g. Optuna) optimise what the task function returns: the score sweep_objective names
        # (-inf for a rank > 0 that found the run finished, which has no return of its own).
        return sweep_score(summary, cfg.sweep_objective, cfg.train_until_avg_return)

    return task


def run_job(job: DictConfig, task: Callable[[DictConfig], float]) -> None:
    """Runs `task` as Hydra's job on `job` (the command line composed by the checks, Hydra's node included), as
    hydra.main's single run does on a compose of its own (Hydra.run): Hydra's logging, its callbacks, the run
    folder with `.hydra/`, the job's logging, HydraConfig for the job; an exception escaping `task` is reported
    as Hydra reports it (HYDRA_FULL_ERROR=1: the whole traceback)."""
    # Hydra's own parts for this (hydra.main has no entry that takes a composed config): its callbacks and its
    # error report are in hydra._internal; run_job and configure_log are those its launchers use.
    from hydra._internal.callbacks import Callbacks
    from hydra._internal.utils import run_and_report
    from hydra.core.utils import configure_log
    from hydra.core.utils import run_job as hydra_run_job
    from hydra.types import HydraContext

    def run() -> None:
        with open_dict(job.hydra):
            job.hydra.mode = RunMode.RUN
        configure_log(job.hydra.hydra_logging, job.hydra.verbose)
        callbacks = Callbacks(job)
        callbacks.on_run_start(config=job, config_name=job.hydra.job.config_name)
        done = hydra_run_job(task_function=task, config=job, job_dir_key="hydra.run.dir", job_subdir_key=None,
                             hydra_context=HydraContext(config_loader=GlobalHydra.instance().config_loader(),
                                                        callbacks=callbacks))
        callbacks.on_run_end(config=job, config_name=job.hydra.job.config_name, job_return=done)
        _ = done.return_value  # the task's exception, raised again

    run_and_report(run)


class JobComposer:
    """Composes the running job's config with other overrides (Hydra's compose API inside the app: the resume
    stage's view of what a group option sets, sf_hydra.app.resume_config)."""

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        from hydra import compose

        return compose(HydraConfig.get().job.config_name, list(overrides))

    def group_exists(self, name: str) -> bool:
        loader = GlobalHydra.instance().config_loader()
        return bool(loader.get_group_options(name, results_filter=None))


def use_sweep_folder(cfg: DictConfig) -> bool:
    """In --multirun, a run's folder is the one Hydra made for it inside the sweep's folder."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return False
    cfg.run_dir = hydra_cfg.runtime.output_dir
    return True


def ends_process(main: Callable[[], None]) -> Callable[[], None]:
    """An entry point that ends the process with its exit code once it returns or exits: the atexit
    handlers run (logs flushed and closed, the sampler's processes reaped, the run folder's lock
    freed), then the process exits without the interpreter's teardown, which spent ~1.5 s here
    freeing torch's and Lightning's modules one by one. An exception that escapes `main`, or another
    non-daemon thread still alive, takes the interpreter's usual way out."""

    @functools.wraps(main)
    def run() -> None:
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code
        if code is None:
            code = 0
        elif not isinstance(code, int):  # sys.exit("message"): printed, exit status 1
            print(code, file=sys.stderr)
            code = 1
        if any(t is not threading.main_thread() and t.is_alive() and not t.daemon for t in threading.enumerate()):
            sys.exit(code)
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)

    return run


@ends_process
def train_main() -> None:
    """Bad input is refused here, before Hydra writes into the run folder (sf_hydra.app.checks);
    exit codes: README.md, "Exit codes"."""

    def stop_starting(signum, frame):  # SIGTERM before training takes the signals: stop, cleaning up
        print("interrupted (SIGTERM): stopped", file=sys.stderr)
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop_starting)
    try:
        _train_main()
    except KeyboardInterrupt:  # Ctrl+C before training took the signals, or a repeated stop signal (an abort)
        sig = signals.received() or signal.SIGINT
        print(f"interrupted ({sig.name}): stopped", file=sys.stderr)
        sys.exit(128 + sig)
    finally:
        signal.signal(signal.SIGTERM, previous)


def train_command_line(argv: Sequence[str], config_dir: str) -> List[str]:
    """What Hydra gets for train.py's `argv`: Sample Factory's flags translated, the aliases spelled out
    (config/aliases.py) and, in --multirun, the sweep's folder names (config/sweep_folders.py)."""
    argv = apply_aliases(sf_command_line(argv, config_dir, prog("train.py")))
    if help_request(argv) is None and is_multirun(argv):
        try:
            argv = with_overrides(argv, sweep_overrides(argv))
        except HydraException:
            pass  # an override that does not parse: the checks refuse it, naming it
    return argv


def _train_main() -> None:
    config_path, config_dir = find_configs()
    register_configs()
    sweeper_defaults_last()
    # the one rewrite, before anything reads it; a torchrun worker of rank > 0 lets Hydra write nothing
    sys.argv[1:] = train_command_line(sys.argv[1:], config_dir) + worker_overrides()
    if help_request(sys.argv[1:]) is not None:  # our --help [prefix]: groups and keys from the schema
        sys.exit(print_help(sys.argv[1:], config_dir))
    checked = None
    try:
        # Once the config's own rules pass, the fork server imports torch for the workers while this
        # process imports what the later stages need (the targets' modules, the env family's code).
        checked = check_command_line(sys.argv[1:], config_dir, rules_passed=mp.warm_up,
                                     looks=lambda cfg: choose(cfg).place.is_zero)  # rank 0 alone decides
        topology = None if checked is None else choose(checked.cfg)
        start = None if checked is None else checked.start
        if start is not None and start.kind == FINISHED and not topology.others_wait:  # nothing to do
            print(start.message)
            sys.exit(0)
        if topology is not None and topology.place.is_zero:  # a single run: its folder is ours until this ends
            RunLock(Path(checked.cfg.run_dir).absolute()).acquire()
        if start is not None and start.kind == RESUME:  # which run, how far, made by which command
            print(start.message, file=sys.stderr)
    except ConfigError as e:
        print(f"bad config: {e}", file=sys.stderr)
        sys.exit(EXIT_BAD_CONFIG)
    except Fault as e:
        print(e, file=sys.stderr)
        sys.exit(e.exit_code)
    except Exception as e:  # a check that failed in itself: hydra.main composes and train() runs every check
        GlobalHydra.instance().clear()
        checked = None
        log.debug("command-line check skipped: %r", e)
    if checked is not None and checked.job is not None:  # a single run: Hydra runs the job on the checks' compose
        with hydra_for(sys.argv[1:], config_dir):
            run_job(checked.job, train_task(checked))
        return
    # --multirun, Hydra's own flags, or checks that could not run: hydra.main composes (docs/validation.md)
    hydra.main(version_base="1.3", config_path=config_path, config_name="train")(train_task(None))()


def sweeper_defaults_last() -> None:
    """Our `hydra/sweeper=optuna` node stored after Hydra's plugin scan: the scan runs each plugin module again,
    path entry by path entry, so where sf_hydra's folder comes first on sys.path (PYTHONPATH=src) the Optuna
    plugin's own node (minimise, in memory) would replace ours."""
    from hydra.core.plugins import Plugins

    from hydra_plugins.sf_hydra_plugins import optuna_defaults

    Plugins.instance()  # the scan, once per process (Hydra would run it when it first composes)
    optuna_defaults.register()


def _enjoy(cfg: DictConfig):
    # Imported here, not above: torch and the envs, which `enjoy.py --help` and a bad command line never need.
    from sf_hydra.app.enjoy import enjoy

    if cfg.episodes < 1:
        log.error("bad config: %s", ConfigError("episodes", cfg.episodes, "an integer >= 1"))
        sys.exit(2)
    try:
        if cfg.push_to_hub:  # checked before playing: a bad repo or a missing extra is said at once
            from sf_hydra.app.hub import parse_push, push

            if not cfg.hf_repository:
                raise ConfigError("hf_repository", None, "user/name: the Hub repo push_to_hub=true uploads to")
            args = parse_push([f"run_dir={cfg.run_dir}", f"repo={cfg.hf_repository}"])
        result = enjoy(cfg)
        if cfg.push_to_hub:
            push(args)
        return result["mean_return"]
    except ConfigError as e:
        log.error("bad config: %s", e)
        sys.exit(2)
    except Fault as e:  # one line, no traceback (a missing extra, a checkpoint that does not load)
        log.error("%s", e)
        sys.exit(e.exit_code)


@ends_process
def enjoy_main() -> None:
    config_path, config_dir = find_configs()
    register_configs()
    sys.argv[1:] = sf_command_line(sys.argv[1:], config_dir, prog("enjoy.py"), stage="enjoy")
    if help_request(sys.argv[1:]) is not None:  # enjoy's keys and their meanings, not Hydra's generic help
        sys.exit(print_enjoy_help(sys.argv[1:], config_dir))
    hydra.main(version_base="1.3", config_path=config_path, config_name="enjoy")(_enjoy)()
