"""The run folder (`run_dir`: `${train_dir}/${experiment}`, or a run's folder in a sweep): what `restart_behavior`
does with an existing one, where checkpoints live, which checkpoint a resume starts from (the newest intact
one), and the lock that keeps a second run out of a folder a live run holds."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.faults import CheckpointError, RunFolderBusy
from sf_hydra.core.files import write_atomically

LAST = "last.ckpt"
LOCK = ".lock"
LOCK_ENV = "SF_HYDRA_RUN_LOCK"  # "off": no run takes a lock (a file system without flock), at the user's own risk
NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS)  # flock's errors where a mount has none
MILESTONES = "milestones"  # checkpoints/milestones/: kept forever (keep_checkpoints prunes only checkpoints/)
SAVED_AT_KEY = "sf_hydra_saved_at"  # in every checkpoint: time.time() when it was saved (which state is the newest)
BEST_KEY = "sf_hydra_best"  # in a best checkpoint: {policy, metric, value, env_steps, policy_version, ...}; by an
# eval/ metric also evaluated_run_env_steps, evaluated_weights (the state_dict evaluated), evaluated_policy_version
log = logging.getLogger("sf_hydra")


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def best_checkpoint_name(policy: int = 0) -> str:
    """The best checkpoint of trained policy `policy` (the whole learner state when its metric peaked)."""
    return f"best_p{policy}.ckpt"


def read_best(path: Path) -> Optional[dict]:
    """What a best checkpoint records of itself (BEST_KEY), or None when it is missing or unreadable."""
    import torch  # cli.py imports run_dir on the config-error path, which must not load torch

    if not Path(path).is_file():
        return None
    try:
        return dict(torch.load(path, map_location="cpu", weights_only=True)[BEST_KEY])
    except Exception as e:  # truncated, corrupt or not a best checkpoint: a new best replaces it
        log.warning("best checkpoint %s is unreadable (%s: %s): the next best replaces it", path, type(e).__name__, e)
        return None


SPACES = "spaces.json"  # the env's spaces as the policies see them (core/spaces.py space_to_json)
RUN_STATE = ("checkpoints", "tb", "config.yaml", SPACES, "summary.json", "selfplay", "wandb", "wandb_id")


def save_spaces(run_dir: Path, observation, action, num_agents: Optional[int]) -> Path:
    """`spaces.json`: what a trained policy reads and returns (one agent's observation and action spaces, the
    agent count of a multi-agent env), so that it can be loaded and called without building the env."""
    from sf_hydra.core.spaces import space_to_json  # torch: not on the config-error path, which imports run_dir

    path = Path(run_dir) / SPACES
    text = json.dumps({"observation": space_to_json(observation), "action": space_to_json(action),
                       "num_agents": num_agents}, indent=1)
    write_atomically(path, lambda tmp: Path(tmp).write_text(text))
    return path


def read_spaces(run_dir: Path) -> Optional[Tuple[object, object, Optional[int]]]:
    """(observation space, action space, agent count) from a run's `spaces.json`; None when the run has none
    (trained before it was written)."""
    from sf_hydra.core.spaces import space_from_json  # torch: not on the config-error path, which imports run_dir

    path = Path(run_dir) / SPACES
    if not path.is_file():
        return None
    d = json.loads(path.read_text())
    return space_from_json(d["observation"]), space_from_json(d["action"]), d.get("num_agents")


class RunLock:
    """An exclusive `flock` on `<run_dir>/.lock`, held while a run uses the folder. The kernel drops it when the
    holder exits in any way (kill -9 included), so it never stays stuck. Re-entrant within one process (the
    command line takes it before Hydra writes into the folder, train() takes it again). On a file system mounted
    without locks (Lustre without `flock`, some NFS setups) a ConfigError names it and the ways on; with
    SF_HYDRA_RUN_LOCK=off no lock is taken (said once per run)."""

    _held: Dict[str, List] = {}  # real path -> [open lock file, or None without a lock (LOCK_ENV), depth]

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _key(self) -> str:
        return os.path.realpath(self.run_dir / LOCK)

    def acquire(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        key = self._key()
        if key in RunLock._held:
            RunLock._held[key][1] += 1
            return
        if os.environ.get(LOCK_ENV) == "off":
            log.warning("%s=off: run folder %s is not locked; nothing keeps a second run out of it", LOCK_ENV,
                        self.run_dir)
            RunLock._held[key] = [None, 1]
            return
        f = open(key, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            pid = f.read().strip()
            f.close()
            raise RunFolderBusy(self.run_dir, pid) from None
        except OSError as e:
            f.close()
            if e.errno not in NO_LOCKS:
                raise
            raise ConfigError("run_dir", str(self.run_dir), f"a folder on a file system with file locks: "
                              f"{_file_system_of(self.run_dir)} refuses flock on {key} ({e.strerror}, "
                              f"{errno.errorcode.get(e.errno, e.errno)}). Put train_dir on a local disk or on a "
                              "file system mounted with locks (Lustre: the `flock` mount option), or set "
                              f"{LOCK_ENV}=off to run without the lock at your own risk (nothing then keeps a "
                              "second run out of the folder)") from None
        f.truncate(0)
        f.write(str(os.getpid()))
        f.flush()
        RunLock._held[key] = [f, 1]

    def release(self) -> None:
        entry = RunLock._held.get(self._key())
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del RunLock._held[self._key()]
            if entry[0] is not None:
                entry[0].close()  # closing the file drops the flock


def held_by_another(run_dir: Path) -> bool:
    """Whether another process holds `run_dir`'s lock now (a live run uses the folder); asks without taking it."""
    path = Path(run_dir) / LOCK
    if os.path.realpath(path) in RunLock._held or not path.is_file():
        return False
    with open(path) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:  # a file system without locks: acquiring says so
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def _file_system_of(path: Path) -> str:
    """Names the file system holding `path` ("the <type> file system mounted at <mount point>": the longest mount
    point of /proc/self/mounts above it), or "its file system" where that cannot be read."""
    where = os.path.realpath(path)
    try:
        mounts = [line.split()[1:3] for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return "its file system"
    octal = re.compile(r"\\([0-7]{3})")  # the table writes a space in a mount point as \040
    mounts = [(octal.sub(lambda m: chr(int(m.group(1), 8)), point), kind) for point, kind in mounts]
    above = [(point, kind) for point, kind in mounts if where == point or where.startswith(point.rstrip("/") + "/")]
    if not above:
        return "its file system"
    point, kind = max(above, key=lambda m: len(m[0]))
    return f"the {kind} file system mounted at {point}"


def prepare(run_dir: Path, restart_behavior: str) -> None:
    """resume: keep everything; restart: move the old run's state aside to
    `<name>_old_<time>/`; overwrite: delete it. Hydra's own files (.hydra, the log) stay,
    since Hydra has already opened them for this run. Leftover `*.tmp` files of an interrupted
    save (a checkpoint, config.yaml, summary.json: sf_hydra.core.files) are removed (call it with the
    folder's RunLock held)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for folder in (run_dir, checkpoint_dir(run_dir), checkpoint_dir(run_dir) / MILESTONES):
        for tmp in sorted(folder.glob("*.tmp")) if folder.is_dir() else []:
            log.warning("removing %s (left by a save that did not finish)", tmp)
            tmp.unlink(missing_ok=True)
    existing = [run_dir / name for name in RUN_STATE if (run_dir / name).exists()]
    if restart_behavior == "restart" and existing:
        aside = run_dir.with_name(f"{run_dir.name}_old_{time.strftime('%Y%m%d_%H%M%S')}")
        aside.mkdir(parents=True)
        for path in existing:
            shutil.move(str(path), str(aside / path.name))
    elif restart_behavior == "overwrite":
        for path in existing:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def learner_states(folder: Path) -> List[Path]:
    """Every file of a checkpoint folder that holds a whole learner state: last.ckpt, the numbered
    checkpoints, the milestones and each policy's best checkpoint."""
    if not folder.is_dir():
        return []
    return ([folder / LAST] if (folder / LAST).is_file() else []) + sorted(folder.glob("checkpoint_*.ckpt")) + \
        sorted((folder / MILESTONES).glob("checkpoint_*.ckpt")) + sorted(folder.glob("best_p*.ckpt"))


def examine(path: Path, shapes: Optional[Dict[str, tuple]] = None) -> Tuple[Optional[int], float, str]:
    """(env steps, when it was saved as time.time(), "") for a learner state that loads (and, given the model's
    `shapes`, fits it: misfit), else (None, 0, why not). The time is the one recorded in it (SAVED_AT_KEY), else
    the file's modification time (older checkpoints; a copied folder's files may all share one). The tensors are
    memory-mapped, not read."""
    import torch  # cli.py imports run_dir on the config-error path, which must not load torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        steps, saved_at = int(state["sf_hydra"]["env_steps"]), float(state.get(SAVED_AT_KEY) or path.stat().st_mtime)
    except Exception as e:  # truncated, corrupt, not a checkpoint, or not ours: each is a reason to skip it
        reason = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return None, 0.0, f"{type(e).__name__}: {reason}"[:200]
    unfit = misfit(state.get("state_dict") or {}, shapes) if shapes else ""
    return (None, 0.0, f"{UNFIT}: {unfit}") if unfit else (steps, saved_at, "")


UNFIT = "does not fit the model"


def misfit(weights: dict, shapes: Dict[str, tuple]) -> str:
    """Why a checkpoint's state_dict does not fit a model whose tensors have `shapes` ({name: shape}; the
    learner's names, `policies.<k>.`): the first tensor it lacks, holds of another shape, or holds besides; ""
    when it fits. A checkpoint saved before several policies names policy 0's tensors `model.`."""
    got = {f"policies.0.{k[len('model.'):]}" if k.startswith("model.") else k: tuple(getattr(v, "shape", ()))
           for k, v in weights.items()}
    for name, shape in shapes.items():
        if name not in got:
            return f"it has no {name}"
        if got[name] != tuple(shape):
            return f"its {name} has shape {list(got[name])}, the model's {list(shape)}"
    extra = [name for name in got if name not in shapes]
    return f"it has {extra[0]}, which the model has not" if extra else ""


def _clock(saved_at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(saved_at))


def resume_checkpoint(run_dir: Path, kind: str = "latest", shapes: Optional[Dict[str, tuple]] = None) -> Optional[Path]:
    """The newest learner state that loads (learner_states, by when it was saved): last.ckpt as a rule; a
    best checkpoint or a milestone saved after it (a stop that never reached its final save) is chosen over
    it, and a damaged file, or one that does not fit the model whose tensors have `shapes` (misfit), is
    skipped, each said with the env steps and times of both. None when the folder
    holds no learner state; CheckpointError when it holds some and none loads. kind="best"
    (load_checkpoint_kind): policy 0's best checkpoint instead; ConfigError naming load_checkpoint_kind when
    there is none yet."""
    folder = checkpoint_dir(run_dir)
    candidates = learner_states(folder)
    if not candidates:
        return None
    if str(kind) == "best":
        return _best_to_resume(folder, shapes)
    intact, tried = [], []
    for path in candidates:
        steps, saved_at, why = examine(path, shapes)
        if steps is None:
            log.warning("checkpoint %s %s: skipping it", path, why if why.startswith(UNFIT) else
                        f"is unreadable ({why})")
            tried.append(f"{path.name} ({why})")
        else:
            intact.append((saved_at, path.name == LAST, steps, path))
    if not intact:
        raise CheckpointError(f"no checkpoint in {folder} can be loaded; found: {'; '.join(tried)}. Move the "
                              "folder aside to keep it, or start over with restart_behavior=restart (or overwrite)")
    saved_at, is_last, steps, path = max(intact, key=lambda s: s[:2])  # the newest; on a tie last.ckpt
    if is_last:
        return path
    last = [s for s in intact if s[1]]
    if last:
        log.warning("resuming from %s (%d env steps, saved %s): a newer learner state than %s (%d env steps, "
                    "saved %s): the run stopped without its final checkpoint", path, steps, _clock(saved_at), LAST,
                    last[0][2], _clock(last[0][0]))
    else:
        log.warning("resuming from %s instead (the newest intact checkpoint: %d env steps, saved %s)", path, steps,
                    _clock(saved_at))
    return path


def _best_to_resume(folder: Path, shapes: Optional[Dict[str, tuple]]) -> Path:
    best = folder / best_checkpoint_name(0)
    if not best.is_file():
        raise ConfigError("load_checkpoint_kind", "best", f"latest: {folder} holds no best checkpoint yet "
                          f"({best.name} is written every save_best_every_sec once policy 0 has trained "
                          "save_best_after env steps and finished episodes)")
    steps, _, why = examine(best, shapes)
    if steps is None:
        raise CheckpointError(f"the best checkpoint {best} cannot be loaded ({why}): resume with "
                              "load_checkpoint_kind=latest, or start over with restart_behavior=restart")
    log.info("resuming from the best checkpoint %s (%d env steps)", best, steps)
    return best


def _reached(summary: dict, steps: int, seconds: float, target: Optional[float], window: int) -> List[str]:
    """The budgets a run's saved summary has reached: `key=value (what the run did)` for each."""
    policies = summary.get("policies") or [summary]
    done = min(p.get("env_steps", 0) for p in policies)  # several policies: each one's own env steps
    reached = []
    if done >= steps:
        reached.append(f"train_for_env_steps={steps} ({done} env steps trained)")
    if summary.get("train_seconds", 0.0) >= seconds:
        reached.append(f"train_for_seconds={seconds:g} ({summary['train_seconds']:.0f} s trained)")
    returns = [p.get("avg_return") for p in policies]
    if target is not None and all(isinstance(r, (int, float)) and r >= target for r in returns) and \
            all(p.get("episodes", 0) >= window for p in policies):
        reached.append(f"train_until_avg_return={target:g} (avg return {min(returns):.1f})")
    return reached


def finished_run(run_dir: Path, train_for_env_steps: int, train_for_seconds: float,
                 train_until_avg_return: Optional[float], stats_avg: int) -> Optional[Tuple[dict, str]]:
    """(saved summary, what to say) for a run that already reached one of these budgets (its last.ckpt and
    summary.json say so), so that re-running it does not silently train on: a re-run sweep leaves its
    finished runs alone, and train.py says the run is finished, how far it went, and how to train more (a
    larger budget) or start over. None when the run has budget left, or there is no finished session."""
    summary_path = Path(run_dir) / "summary.json"
    if not (checkpoint_dir(Path(run_dir)) / LAST).is_file() or not summary_path.exists():
        return None
    try:
        summary = json.loads(summary_path.read_text())
    except ValueError:
        return None  # a summary cut short: the checkpoint decides, training resumes
    reached = _reached(summary, train_for_env_steps, train_for_seconds, train_until_avg_return, stats_avg)
    if not reached:
        return None
    more = []
    if any(r.startswith("train_for_env_steps") for r in reached):
        more.append(f"train_for_env_steps={max(2 * train_for_env_steps, 1)}")
    if any(r.startswith("train_for_seconds") for r in reached):
        more.append(f"train_for_seconds={2 * train_for_seconds:g}")
    if any(r.startswith("train_until_avg_return") for r in reached):
        more.append("train_until_avg_return=null (or a higher target)")
    ret = summary.get("avg_return")
    ret = f"{ret:.1f}" if isinstance(ret, (int, float)) else "none yet"
    message = (f"run folder {run_dir} is finished: {summary.get('env_steps', 0)} env steps, avg return {ret} "
               f"over {summary.get('episodes', 0)} episodes; budget reached: "
               f"{'; '.join(reached)}: nothing to do. To train it more, give a larger budget ({' '.join(more)}); "
               "to start over: restart_behavior=restart (moves it aside) or restart_behavior=overwrite (deletes "
               "it); for a new run beside it: experiment=<name>")
    return summary, message
