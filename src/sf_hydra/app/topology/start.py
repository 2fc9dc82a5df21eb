"""How a run starts (RunStart), decided once per run by the one process that may: global rank 0, with the run
folder's lock held. The command line looks at the folder before Hydra writes into it (`look`: finished? resuming
what?); rank 0 then acts on that look (`decide`: prepares the folder for `restart_behavior` and picks the checkpoint
that fits the run's models); every other rank receives the decision (the topology hands it over) and acts on it,
never on what it reads in the folder itself.

A decision crosses processes (and machines) as JSON (`encode`, `decode`), never as a pickle; `decode` validates
every field, so bytes that are not a decision are refused.

This module imports no torch (the command line's side)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, Optional

from sf_hydra.app.resume_config import finished, resumed_run, resumes
from sf_hydra.core import run_dir as rd
from sf_hydra.core.faults import RankFailed

NEW, RESUME, FINISHED, REFUSED = "new", "resume", "finished", "refused"
KINDS = (NEW, RESUME, FINISHED, REFUSED)
_TEXT_FIELDS = ("checkpoint", "message", "session")  # each a string or null in a decision's JSON


@dataclass(frozen=True)
class RunStart:
    """How one start of a run begins. Invariant: `checkpoint` is set exactly when `kind` is "resume" and the
    learner state is chosen (`decide`); `message` says what a finished run reached, what a resume continues, or
    rank 0's error for a refused start."""

    kind: str
    checkpoint: Optional[str] = None  # the learner state every rank resumes from
    message: Optional[str] = None
    session: Optional[str] = None  # a token naming this start: the rank records and ranks/start.json carry it
    config: Optional[Dict[str, object]] = None  # rank 0's config fingerprint (ranks.config_fingerprint)
    summary: Optional[dict] = field(default=None, compare=False)  # a finished run's saved summary (rank 0 alone)

    @property
    def trains(self) -> bool:
        return self.kind in (NEW, RESUME)


def look(cfg, prog_name: str) -> RunStart:
    """What the run folder says before anything is written into it: the run reached its budget (finished, with its
    summary and what to say), resumes (what it continues, and the command of its last session, read before Hydra
    rewrites `.hydra/`: `prog_name` is how the user calls train.py), or starts anew."""
    done = finished(cfg)
    if done is not None:
        return RunStart(FINISHED, message=done[1], summary=done[0])
    if resumes(cfg):
        return RunStart(RESUME, message=resumed_run(Path(cfg.run_dir).absolute(), prog_name))
    return RunStart(NEW)


def decide(cfg, run_dir: Path, shapes: Dict[str, tuple], looked: RunStart, session: Optional[str] = None) -> RunStart:
    """Rank 0 acts on `looked`: a finished run stays as it is; else the folder is prepared for restart_behavior and
    the run resumes from the newest checkpoint that loads and fits the models of `shapes` (rd.resume_checkpoint),
    or starts anew when there is none. The start is named `session`, else by a fresh token. Raises what
    resume_checkpoint raises (ConfigError: kind=best and no best yet; CheckpointError: none loads)."""
    session = session or uuid.uuid4().hex
    if looked.kind == FINISHED:
        return replace(looked, session=session)
    rd.prepare(run_dir, cfg.restart_behavior)
    ckpt = rd.resume_checkpoint(run_dir, cfg.load_checkpoint_kind, shapes)
    if ckpt is None:
        return RunStart(NEW, session=session)
    return RunStart(RESUME, str(ckpt), looked.message if looked.kind == RESUME else None, session=session)


def refused(error: BaseException, session: Optional[str] = None) -> RunStart:
    """The decision of a rank 0 that could not start the run (its error, one line)."""
    return RunStart(REFUSED, message=f"{type(error).__name__}: {error}", session=session)


def encode(start: RunStart) -> bytes:
    """The decision as canonical JSON (a finished run's summary stays with rank 0)."""
    fields = {"kind": start.kind, "checkpoint": start.checkpoint, "message": start.message,
              "session": start.session, "config": start.config}
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def decode(data: bytes, who: str) -> RunStart:
    """The decision in `data` (encode's JSON); RankFailed naming `who` when it is not one: not JSON, another set
    of fields, an unknown kind, a field of the wrong type, or a resume without its checkpoint."""
    try:
        fields = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise RankFailed(f"{who}: learner rank 0's start decision is not JSON ({e})") from None
    wrong = _wrong_field(fields)
    if wrong is not None:
        raise RankFailed(f"{who}: what came as learner rank 0's start decision is not one ({wrong})")
    return RunStart(**fields)


def _wrong_field(fields) -> Optional[str]:
    """What makes `fields` no decision (None: it is one)."""
    if not isinstance(fields, dict) or set(fields) != {"kind", "config", *_TEXT_FIELDS}:
        return f"fields {sorted(fields) if isinstance(fields, dict) else type(fields).__name__}"
    if fields["kind"] not in KINDS:
        return f"kind {fields['kind']!r}"
    bad = [k for k in _TEXT_FIELDS if fields[k] is not None and not isinstance(fields[k], str)]
    if bad or not (fields["config"] is None or isinstance(fields["config"], dict)):
        return f"field {(bad or ['config'])[0]} of type {type(fields[(bad or ['config'])[0]]).__name__}"
    if (fields["kind"] == RESUME) != (fields["checkpoint"] is not None):
        return "a checkpoint only and always with kind resume"
    return None
