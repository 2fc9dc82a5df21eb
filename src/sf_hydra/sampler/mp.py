"""The process context for the sampler: `multiprocess` with a fork server, taught to share torch
tensors by handle (its own pickler does not know torch and would copy them)."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
from typing import Optional

import multiprocess
import multiprocess.reduction as mp_reduction
from multiprocess import forkserver

_registered = False


def register_torch_reducers() -> None:
    global _registered
    if _registered:
        return
    import torch  # mp.warm_up runs on the config-error path (cli.py), which must not load torch
    import torch.multiprocessing.reductions as torch_reductions  # as above
    from torch.nn.parameter import Parameter  # as above

    torch.multiprocessing.set_sharing_strategy("file_system")
    register = mp_reduction.ForkingPickler.register
    for storage_cls in torch._storage_classes:
        if storage_cls.__name__ == "UntypedStorage":
            register(storage_cls, torch_reductions.reduce_storage)
        else:
            register(storage_cls, torch_reductions.reduce_typed_storage_child)
    register(torch.storage.TypedStorage, torch_reductions.reduce_typed_storage)
    for tensor_cls in (*torch._tensor_classes, torch.Tensor, Parameter):
        register(tensor_cls, torch_reductions.reduce_tensor)
    _registered = True


# What the fork server imports once, before it forks any sampler process: each worker or inference
# server then starts with torch and its own module already loaded (spawned, each imported them
# itself: about 2-3 s of CPU per process here, more while the learner imports Lightning beside it).
FORKSERVER_PRELOAD = ["torch", "sf_hydra.sampler.rollout_worker", "sf_hydra.sampler.inference_server"]
# Signals the learner's children ignore: a terminal's Ctrl+C, Slurm's scancel and a `kill` of the process group
# reach every process, and only the learner acts on them (it saves its checkpoint, then stops its children).
STOPPED_BY_THE_LEARNER = (signal.SIGINT, signal.SIGTERM)


def context():
    """`multiprocess`'s forkserver context: a clean server process (it imports, never runs torch ops,
    so forking it is safe) forks each sampler process. The children take the learner's environment
    variables from their arguments (`parent_state` / `adopt`), since a fork server's are those of
    when it started."""
    register_torch_reducers()
    ctx = multiprocess.get_context("forkserver")
    ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
    stop_fork_server_at_exit()
    return ctx


_shm_manager_started = False


def start_shm_manager() -> None:
    """Starts torch's shared-memory manager for this process (file_system strategy: the first tensor shared
    starts `torch_shm_manager`), its stderr on /dev/null. Started by the first share_memory_() as it comes,
    it keeps the learner's stderr, and lives ~2 s after the learner's exit (its idle wait): `python train.py
    2>&1 | tee log`, and every test that captures train.py's output, waited for it. Its stdout is torch's own
    pipe; what it would write to stderr is an error that torch raises in this process too."""
    global _shm_manager_started
    if _shm_manager_started:
        return
    import torch  # only once the sampler is built: torch is loaded by then

    sys.stderr.flush()  # what this process wrote so far goes out, not to /dev/null
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all: nothing to keep
        torch.zeros(1).share_memory_()
        _shm_manager_started = True
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        torch.zeros(1).share_memory_()  # starts the manager, which inherits fd 2 (now /dev/null)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    _shm_manager_started = True


_stop_registered_by: Optional[int] = None  # the pid that registered stop_fork_server


def stop_fork_server_at_exit() -> None:
    """At this process's exit (atexit; registered before the handlers that reap the sampler's processes, it
    runs after them), the fork server it started ends at once (`stop_fork_server`)."""
    global _stop_registered_by
    if _stop_registered_by is None:
        atexit.register(stop_fork_server)
        _stop_registered_by = os.getpid()


def stop_fork_server() -> None:
    """Ends the fork server this process started, if any, without its teardown. Left alone, it notices the
    learner's end and exits through the interpreter's teardown of torch (~1.1 s here), holding the learner's
    stdout and stderr meanwhile: `python train.py | tee log`, and every test that captures train.py's output,
    waited for it. Nothing is lost: the server only forks; its children are the sampler's processes, reaped
    (or killed) by then, and any child still alive watches the learner (ParentWatch)."""
    server = forkserver._forkserver
    pid = server._forkserver_pid
    if pid is None or os.getpid() != _stop_registered_by:  # a forked child of the learner: not its server
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        server._stop()  # closes its lifeline, reaps it (at once now) and removes its socket
    except OSError:
        pass


def warm_up() -> None:
    """Starts the fork server now, so that it imports its preload while this process does other
    start-up work. train.py calls it once the config's own rules passed, before its own checks
    that import torch: the two imports of torch then run side by side (~2 s each here). Light:
    this process does not import torch for it."""
    multiprocess.get_context("forkserver").set_forkserver_preload(FORKSERVER_PRELOAD)
    stop_fork_server_at_exit()
    # The server ignores Ctrl+C only once its preload is imported; started with SIGINT ignored (kept
    # across exec), a Ctrl+C during its imports is train.py's alone, without a second traceback.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


def parent_state() -> dict:
    """What a sampler process takes over from the learner at its start (see `adopt`)."""
    return {"environ": dict(os.environ)}


def adopt(state: dict) -> None:
    """Makes this (forked-by-the-server) process see the learner's environment variables as they were
    when it was started. (Its folder and sys.path already come with multiprocess's preparation data.)"""
    os.environ.clear()
    os.environ.update(state["environ"])


class ParentWatch:
    """Whether the learner that started this sampler process still lives. Forked by the fork server,
    the process's parent is that server, which exits when the learner does (its lifeline to the
    learner closes); spawned or forked directly, the parent is the learner. Either way the parent it
    had at start changes (re-parented) when the learner dies; the learner's pid is probed too."""

    def __init__(self, learner_pid: int):
        self.learner_pid = learner_pid
        self.parent_at_start = os.getppid()

    def alive(self) -> bool:
        if os.getppid() != self.parent_at_start:
            return False
        if self.parent_at_start == self.learner_pid:
            return True
        try:
            os.kill(self.learner_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # a live process of another user (the pid was reused): not ours
            return False
        return True


@contextlib.contextmanager
def signals_deferred():
    """SIGINT and SIGTERM wait until the block is done. Allocating shared memory with the
    file_system strategy talks to torch's shm manager in C++; a stop signal arriving there
    was seen to leave the call spinning forever. Deferred, the signal is handled right after."""
    stops = {signal.SIGINT, signal.SIGTERM}
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def exit_without_teardown(out_queue) -> None:
    """Ends a sampler process (a rollout worker whose envs are closed, an inference server): its last
    messages reach the learner's queue, its output is flushed, and then it exits at once. The
    interpreter's own teardown (finalizing torch and every imported module) took about 1 s, which the
    learner waited for at every stop; shared memory is the learner's to free, as after a kill."""
    out_queue.close()
    out_queue.join_thread()  # the messages still in this process's feeder thread (a failure report among them)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


SHM_DIR = "/dev/shm"


def remove_stale_shared_memory() -> int:
    """Unlinks torch's shared-memory files (`torch_<pid>_...`, the file_system strategy) whose
    creating process is gone: a run killed with SIGKILL leaves its buffers' names behind, and
    nothing else removes them. A file of a live process is kept (a process still mapping an
    unlinked file keeps its memory). Returns how many were removed."""
    if not os.path.isdir(SHM_DIR):
        return 0
    removed, alive = 0, {}
    for name in os.listdir(SHM_DIR):
        parts = name.split("_")
        if len(parts) < 3 or parts[0] != "torch" or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid not in alive:
            try:
                os.kill(pid, 0)
                alive[pid] = True
            except ProcessLookupError:
                alive[pid] = False
            except PermissionError:  # another user's live process
                alive[pid] = True
        if not alive[pid]:
            try:
                os.unlink(os.path.join(SHM_DIR, name))
                removed += 1
            except OSError:
                pass
    return removed
