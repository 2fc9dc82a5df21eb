"""Failures that end a run with one framed message instead of a traceback, and the exit
code each one gives (README.md, "Exit codes"): 0 done, 1 a failure, 2 a bad config,
3 the run folder is held by another live run, 128+N stopped by signal N."""

from __future__ import annotations

import traceback
from pathlib import Path

EXIT_FAILURE = 1
EXIT_BAD_CONFIG = 2
EXIT_BUSY = 3


class NonFiniteTraining(RuntimeError):
    """The learner's updates keep coming out NaN or infinite, or its weights are not finite (declared
    here, not beside the learner, so that catching it does not import Lightning)."""


class Fault(RuntimeError):
    """A failure whose message says what happened and where; printed as is, no traceback."""

    exit_code = EXIT_FAILURE


class RunFolderBusy(Fault):
    exit_code = EXIT_BUSY

    def __init__(self, run_dir, pid):
        self.run_dir, self.pid = run_dir, pid
        holder = f"pid {pid}" if pid else "a process that wrote no pid"
        super().__init__(f"run folder {run_dir} is in use by a live run ({holder}): wait for it to end, stop it, "
                         "or pick another folder (experiment=<name> or train_dir=<folder>)")


class CheckpointError(Fault):
    """No checkpoint of a run folder can be loaded."""


class CheckpointSaveError(Fault):
    def __init__(self, path, cause: OSError):
        self.path, self.cause = path, cause
        reason = cause.strerror or str(cause)
        name = str(cause.filename or "")
        # A folder on the way (checkpoints/ is a file, no permission): name it. Not a temporary file elsewhere
        # (Lightning writes to the system's temp folder first).
        near = name and name != str(path) and (str(path).startswith(name) or name.startswith(str(Path(path).parent)))
        where = f" ({name})" if near else ""
        super().__init__(f"could not save checkpoint {path}: {reason}{where} [{type(cause).__name__}]")


def traceback_tail(exc: BaseException, lines: int = 8) -> str:
    """The last `lines` lines of `exc`'s traceback (where the failing code raised it)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip().splitlines()
    return "\n".join(text[-lines:])


class RankFailed(Fault):
    """A learner rank of a data-parallel run failed (its worker died, it was killed, a collective timed out):
    the whole run ended. The message names the rank and the cause."""


class NodeLost(RankFailed):
    """A learner rank ended with its node: the node's slurmd stopped answering too (the host went down, lost
    power or its network). The run's state is whole up to its last checkpoint, so a Slurm job is requeued and
    resumes from it (sf_hydra.app.requeue); `node` is the node's Slurm name."""

    def __init__(self, message: str, node: str):
        super().__init__(message)
        self.node = node

    def __reduce__(self):  # pickled with the job's result (submitit): both arguments, not only the message
        return type(self), (str(self), self.node)


class EnvStartError(Fault):
    """The env could not be built (or reset) in the learner's process before training."""

    def __init__(self, env_cfg, cause: BaseException):
        name = f"{env_cfg.get('family', '?')}/{env_cfg.get('id', env_cfg.get('name', '?'))}"
        super().__init__(f"env {name} failed to start: {type(cause).__name__}: {cause}\n"
                         f"the env's traceback ends with:\n{traceback_tail(cause)}")
