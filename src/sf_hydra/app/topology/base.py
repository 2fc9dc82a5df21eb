"""What every topology does, and the one-rank topology.

A Topology is how one run is laid over processes and hosts, chosen once per run (sf_hydra.app.topology.choose).
It says where this process stands (`place`), holds the run folder on the one process that may (global rank 0:
`hold`), decides the start there and hands the decision to the other ranks (`begin`), trains this rank beside the
others (`fit`) and names a failure as the rank whose end caused it."""

from __future__ import annotations

import contextlib
import logging
import os
import traceback
from pathlib import Path
from typing import Callable, ContextManager, Dict, Optional

from sf_hydra.app.help import prog
from sf_hydra.app.ranks import Ranks
from sf_hydra.app.topology.start import REFUSED, RunStart, decide, look, refused
from sf_hydra.config import ConfigError
from sf_hydra.core import run_dir as rd
from sf_hydra.core.faults import Fault, NonFiniteTraining, RankFailed

log = logging.getLogger("sf_hydra")

# train.py's training of one rank: (cfg, run_dir, plan, start, topology) -> the rank's summary
FitRank = Callable[..., dict]


class Topology:
    """One rank on one machine: this process holds the folder, decides and trains, without any process group."""

    others_wait = False  # whether ranks started by others wait for rank 0's decision (else rank 0 may end alone)

    def __init__(self, place: Ranks):
        self.place = place

    def __repr__(self) -> str:
        return f"{type(self).__name__}(rank {self.place.rank} of {self.place.world_size})"

    def hold(self, run_dir: Path) -> ContextManager:
        """While the run lasts: rank 0 holds the run folder's lock (a second run on it is refused)."""
        return rd.RunLock(run_dir) if self.place.is_zero else contextlib.nullcontext()

    def begin(self, cfg, run_dir: Path, shapes: Dict[str, tuple], looked: Optional[RunStart] = None) -> RunStart:
        """The start of this run, decided by rank 0 (what the run folder says, `looked` there already by the command
        line's checks or now, acted on: sf_hydra.app.topology.start.decide) and handed to the other ranks, which
        act on it; a rank > 0 whose rank 0 could not start raises RankFailed."""
        if not self.place.is_zero:
            start = self.receive(cfg, run_dir)
            if start.kind == REFUSED:
                raise RankFailed(f"learner rank {self.place.rank} stops: learner rank 0 could not start the run "
                                 f"({start.message})")
            return start
        try:
            start = decide(cfg, run_dir, shapes, looked or look(cfg, prog("train.py")), self.session())
        except BaseException as e:  # ConfigError: kind=best and no best yet; CheckpointError: none loads
            self.hand_over(cfg, run_dir, refused(e, self.session()))
            raise
        self.hand_over(cfg, run_dir, start)
        return start

    def session(self) -> Optional[str]:
        """The name of this start where the launcher gives one (a Slurm job step's); None: rank 0 draws one."""
        return None

    def hand_over(self, cfg, run_dir: Path, start: RunStart) -> None:
        """Rank 0's decision to the other ranks (one rank: nobody to tell)."""

    def receive(self, cfg, run_dir: Path) -> RunStart:
        """Rank r > 0 gets rank 0's decision of this start."""
        raise NotImplementedError(f"{type(self).__name__} has one rank")

    def strategy(self, cfg):
        """The Lightning strategy of this rank (None: Lightning's own, one process)."""
        return None

    def prepare(self, plan, prepare_folder: Callable):
        """Rank 0 prepares the run folder (`prepare_folder(plan)`: the layout, config.yaml, the seal, the spaces;
        it returns the plan for the layout it saved); the other ranks train the plan as built."""
        return prepare_folder(plan) if self.place.is_zero else plan

    def fit(self, cfg, run_dir: Path, plan, start: RunStart, fit_rank: FitRank) -> dict:
        """Trains this rank; returns its summary (rank 0's: the run's)."""
        return fit_rank(cfg, run_dir, plan, start, self)


def own_fault(e: BaseException) -> bool:
    """Whether rank 0 failed for a reason of its own (its sampler, its training, a signal, any error of its own
    code), not because another rank's failure broke a collective: then the other ranks' ends follow from it."""
    from sf_hydra.sampler.sampler import SamplerError  # loaded by the launch already

    own = (SamplerError, NonFiniteTraining, Fault, ConfigError, KeyboardInterrupt, SystemExit)
    return isinstance(e, own) or not from_a_collective(e)


def from_a_collective(e: Optional[BaseException]) -> bool:
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


def timed_out(e: Optional[BaseException]) -> bool:
    """Whether a collective's error says it timed out (gloo: "Timed out waiting", NCCL: "timeout"), not that a
    rank's connection closed: the ranks still running then hang, and waiting for them to end is in vain."""
    while e is not None:
        if "timed out" in str(e).lower() or "timeout" in str(e).lower():
            return True
        e = e.__cause__
    return False
