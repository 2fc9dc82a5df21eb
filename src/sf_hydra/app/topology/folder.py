"""Rank 0's decision written into the run folder (<run_dir>/ranks/start.json), for the ranks that read it there:
the tasks of a Slurm job step (all started at once, before any process group exists), and every rank on another
machine, which proves by reading it that it sees rank 0's run folder (a run on several machines needs train_dir on a
shared filesystem). A decision is read only when it names the start the reader belongs to (its session)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Optional

from sf_hydra.app.ranks import RANKS_DIR, START
from sf_hydra.app.topology.start import RunStart, decode, encode
from sf_hydra.core.faults import RankFailed
from sf_hydra.core.files import write_atomically

log = logging.getLogger("sf_hydra")


def write_start(run_dir: Path, start: RunStart) -> None:
    """Rank 0 writes its decision (atomically: a waiting rank reads all of it or nothing)."""
    folder = run_dir / RANKS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    data = encode(start)
    write_atomically(folder / START, lambda tmp: tmp.write_bytes(data))


def forget_start(run_dir: Path) -> None:
    """The previous start's decision goes, so that no session but this start's names a decision in the folder."""
    (run_dir / RANKS_DIR / START).unlink(missing_ok=True)


def read_start(run_dir: Path, session: str, who: str) -> Optional[RunStart]:
    """The decision in ranks/start.json when it is start `session`'s, else None (none yet, another start's, or
    cut short)."""
    try:
        data = (run_dir / RANKS_DIR / START).read_bytes()
    except OSError:
        return None
    try:
        start = decode(data, who)
    except RankFailed:  # cut short, or not a decision
        return None
    return start if start.session == session else None


def await_start(run_dir: Path, session: str, timeout_sec: float, who: str) -> RunStart:
    """`who` (a rank > 0) waits for rank 0's decision of start `session`; RankFailed, naming rank 0, its log and the
    key, when none comes within `timeout_sec` (hardware.ddp_timeout_sec, how long any rank waits for another)."""
    path = run_dir / RANKS_DIR / START
    log.info("%s waits for rank 0's start decision (%s)", who, path)
    return _polled(run_dir, session, who, timeout_sec, 0.2, lambda: RankFailed(
        f"{who}: learner rank 0 did not decide how the run starts within hardware.ddp_timeout_sec={timeout_sec:g} s "
        f"(no decision for {session} in {path}): see rank 0's log (the run folder's train.log); raise "
        "hardware.ddp_timeout_sec if its start-up is that slow"))


def sees_run_folder(run_dir: Path, session: str, who: str, wait_sec: float = 15.0) -> RunStart:
    """A rank on another machine reads rank 0's decision of start `session` in the run folder it sees at the same
    path (ranks/start.json), which proves it is rank 0's. RankFailed, naming the run folder and saying a shared
    filesystem is needed, when none is there within `wait_sec` (a network filesystem may show a new file late)."""
    path = run_dir / RANKS_DIR / START
    return _polled(run_dir, session, who, wait_sec, 0.5, lambda: RankFailed(
        f"{who} does not see learner rank 0's run folder {run_dir} (train_dir={run_dir.parent}): {path} does not hold "
        f"this start's decision ({session}) after {wait_sec:g} s. A run on several machines needs train_dir on a "
        "filesystem every machine shares (NFS, Lustre, ...), at the same path"))


def acted_on(run_dir: Path, sent: RunStart, who: str, rendezvous: str, wait_sec: float = 15.0) -> RunStart:
    """The decision rank `who` (on a machine of its own, maybe) acts on: the one of start `sent` (what came over the
    process group, whose store has no authentication) in rank 0's run folder, which proves that this rank sees the
    folder (sees_run_folder, up to `wait_sec`), and which must equal `sent`. RankFailed otherwise: what came over
    the group is not rank 0's. `rendezvous`: where the group met, as MASTER_ADDR=... MASTER_PORT=..."""
    start = sees_run_folder(run_dir, sent.session or "", who, wait_sec)
    if start != sent:
        raise RankFailed(f"{who}: the start that came over the process group is not the one in learner rank 0's run "
                         f"folder {run_dir}: another process joined the run at {rendezvous}, which must be reachable "
                         "by this run's machines alone")
    return start


def _polled(run_dir: Path, session: str, who: str, wait_sec: float, poll_sec: float, failure) -> RunStart:
    """Rank 0's decision of start `session` once the run folder holds it, read every `poll_sec`; `failure()`
    raised when none came within `wait_sec`."""
    deadline = time.monotonic() + wait_sec
    while (start := read_start(run_dir, session, who)) is None:
        if time.monotonic() >= deadline:
            raise failure()
        time.sleep(poll_sec)
    return start
