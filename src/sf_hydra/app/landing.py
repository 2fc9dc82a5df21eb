"""A run that comes from elsewhere (`sf-pull`, `sf-import-run`) lands whole and checked, or not at all; a folder
`sf-push local_dir=` writes is replaced whole.

The new folder is built in a hidden folder beside its destination (`written_aside`: the same file system, so that
a rename moves it), and only then swapped in (`swap_in`): what the destination held is renamed aside first, put
back if the rename fails, and removed once the new folder is in place; the swap holds an flock on a lock file
beside the destination, so that two swaps into one folder at once each leave one whole folder. A run from
elsewhere is checked before it is swapped in (`check_landed`): its config parses, `check_pulled_config` passes
it, its checkpoint loads with weights_only, and the weights fit the model its config describes (names, shapes,
dtypes) and are finite. A source folder with a symbolic link in it is refused before anything of it is read
(`refuse_links`): a link would have the pull copy any file of this machine into the run. Every refusal is a
ConfigError naming the file and what is wrong (exit status 2); the destination is then left as it was."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence

from sf_hydra.core.errors import ConfigError
from sf_hydra.core.files import fsync_file, fsync_folder, temporary_name

log = logging.getLogger("sf_hydra")
CONFIG = "config.yaml"
NAMED_PARTS = ("env.factory", "model._target_")  # what a run's config must name for its model and env to be built


def why(e: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:300]


# -- the source ---------------------------------------------------------------------------------------------------
def refuse_links(folder: Path, key: str, blobs: Optional[Path] = None) -> None:
    """ConfigError naming the first symbolic link under `folder` (none is followed). `blobs`: the one folder links
    may point into, to a file (huggingface_hub's cache lays a snapshot out as links to the blobs it downloaded)."""
    for root, dirs, files in os.walk(folder):
        for name in sorted(dirs + files):
            path = Path(root) / name
            if path.is_symlink() and not _into(path, blobs):
                raise ConfigError(key, str(path), f"a folder without symbolic links (this one points to "
                                  f"{os.readlink(path)}): a run from elsewhere is read from its own files only; put "
                                  "the file itself in the link's place")


def _into(link: Path, blobs: Optional[Path]) -> bool:
    target = link.resolve()
    return blobs is not None and target.is_file() and target.parent == blobs.resolve()


def refuse_existing(destination: Path, overwrite: bool) -> None:
    """ConfigError when `destination` holds a run (a folder with anything in it) and `overwrite` is false."""
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())) and not overwrite:
        raise ConfigError("experiment", destination.name, f"a name with no run in {destination.parent} yet "
                          f"({destination} exists), or overwrite=true to replace it")


# -- building aside, swapping in ----------------------------------------------------------------------------------
@contextmanager
def written_aside(destination: Path) -> Iterator[Path]:
    """An empty hidden folder beside `destination` to write the new folder into; when the block ends without an
    error, it is swapped in (swap_in). Whatever fails leaves `destination` as it was, the hidden folder removed."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    folder = temporary_name(destination)
    folder.mkdir()  # (the user's umask: the folder keeps these permissions once in place)
    try:
        yield folder
        _sync(folder)
        swap_in(folder, destination)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def swap_in(new: Path, destination: Path) -> None:
    """`new` renamed to `destination`, under the lock beside it: what `destination` held is renamed aside first,
    put back if the rename fails, and removed once `new` is in place."""
    with _locked(destination):
        aside = temporary_name(destination) if destination.exists() or destination.is_symlink() else None
        if aside is not None:
            os.rename(destination, aside)
        try:
            os.rename(new, destination)
        except BaseException:
            if aside is not None:
                os.rename(aside, destination)
            raise
        fsync_folder(destination.parent)
    if aside is not None and aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside)
    elif aside is not None:
        aside.unlink()


@contextmanager
def _locked(destination: Path) -> Iterator[None]:
    """An exclusive flock on `.<name>.lock` beside `destination`, waited for; dropped when the block ends."""
    with open(destination.parent / f".{destination.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _sync(folder: Path) -> None:
    """Every file under `folder` and the folders themselves on disk before the folder is renamed into place (a
    machine that crashes after the rename finds the files whole)."""
    for root, _, files in os.walk(folder):
        for name in files:
            fsync_file(Path(root) / name)
        fsync_folder(Path(root))


# -- the checks ---------------------------------------------------------------------------------------------------
def check_landed(folder: Path, source: str, trusted: Sequence[str] = ()) -> None:
    """The checks a run from elsewhere (written into `folder`, its weights read from `source`) passes before it
    is swapped in: its config parses and passes check_pulled_config (`trusted`: the code the user trusts by name,
    trusted_targets), before anything of it is built or resolved; its
    checkpoint loads with weights_only; the weights of each policy (and those a best checkpoint evaluated) fit
    the model the config describes, built as Policy.load builds it, and are finite."""
    from sf_hydra.config.saved import with_schema_defaults
    from sf_hydra.core.run_dir import BEST_KEY, LAST, checkpoint_dir

    cfg = read_config(folder / CONFIG)
    check_pulled_config(cfg, folder, trusted)
    cfg = with_schema_defaults(cfg)  # a run saved by an older sf_hydra: today's keys (sf_hydra.config.saved)
    state = _read_checkpoint(checkpoint_dir(folder) / LAST)
    model = _model(cfg, folder)
    weights = state.get("state_dict")
    if not isinstance(weights, dict):
        raise ConfigError("checkpoint", source, "a checkpoint that holds the model's weights (a state_dict)")
    want = model.state_dict()
    plain = not any(str(k).startswith("policies.") for k in weights)  # saved before several policies: `model.`
    for k in range(_policies(cfg)):
        prefix = "model." if plain else f"policies.{k}."
        check_weights({n[len(prefix):]: t for n, t in weights.items() if str(n).startswith(prefix)}, want, prefix,
                      source)
    best = state.get(BEST_KEY)
    if isinstance(best, dict) and best.get("evaluated_weights") is not None:
        check_weights(best["evaluated_weights"], want, f"{BEST_KEY}.evaluated_weights.", source)


def read_config(path: Path):
    """The run's config from `path`: a ConfigError naming the file when it is not a YAML mapping."""
    from omegaconf import DictConfig, OmegaConf

    try:
        cfg = OmegaConf.load(path)
    except Exception as e:  # not YAML (a parser error), not there, or not a config OmegaConf takes
        raise ConfigError(CONFIG, str(path), f"a run's config as YAML that parses ({why(e)})") from None
    if not isinstance(cfg, DictConfig):
        raise ConfigError(CONFIG, str(path), "a run's config: a YAML mapping (it holds a list or a value)")
    return cfg


def check_pulled_config(cfg, folder: Path, trusted: Sequence[str] = ()) -> None:
    """The config of a run from elsewhere, checked before anything it names is imported, called or resolved: the
    code it names is sf_hydra's own part for each place or what the user trusts (sf_hydra.config.trust); it names
    its env family and its network by dotted path (NAMED_PARTS). Once it passes, the folder records its references
    sealed with the user's key (the user took them in by this pull): enjoy and train read it as the user's own."""
    from sf_hydra.config.trust import check_saved_config, seal_run

    check_saved_config(cfg, f"the pulled run's {CONFIG}", trusted)
    missing = [key for key in NAMED_PARTS if _select(cfg, key) is None]
    if missing:
        raise ConfigError(CONFIG, str(folder / CONFIG), f"a run's config that names its env family and network "
                          f"(it has no {' / '.join(missing)}: a run saved by an older sf_hydra, or not a run's)")
    seal_run(folder)


def _select(cfg, key: str) -> Any:
    from omegaconf import OmegaConf

    try:
        return OmegaConf.select(cfg, key, default=None)
    except Exception:  # an interpolation that does not resolve: as good as missing
        return None


def _policies(cfg) -> int:
    value = _select(cfg, "algo.num_policies")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError("algo.num_policies", value, "a count of policies: 1, 2, ...")
    return value


def _read_checkpoint(path: Path) -> Dict[str, Any]:
    """The learner state at `path`, loaded as a resume loads it (weights_only), with the env steps it reached."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        int(state["sf_hydra"]["env_steps"])
    except Exception as e:  # not a checkpoint torch loads without unpickling code, or not one of ours
        raise ConfigError("checkpoint", str(path), f"a learner checkpoint that loads with weights_only and records "
                          f"its env steps ({why(e)})") from None
    return state


def _model(cfg, folder: Path):
    """The network the config describes, for the spaces the run saved (spaces.json), built as Policy.load does."""
    from sf_hydra.evaluation.policy import run_spaces
    from sf_hydra.models import build_model, model_recipe

    try:
        observation_space, action_space = run_spaces(folder, cfg)
    except ConfigError:
        raise
    except Exception as e:  # a spaces.json that is not JSON or not spaces
        raise ConfigError("spaces.json", str(folder / "spaces.json"), f"the env's spaces as sf-push writes them "
                          f"({why(e)})") from None
    try:
        return build_model(model_recipe(cfg), observation_space, action_space)
    except ConfigError:
        raise
    except Exception as e:  # a model section whose values do not build a network
        raise ConfigError(CONFIG, str(folder / CONFIG), f"a config whose model builds for the run's spaces "
                          f"({why(e)})") from None


def check_weights(got: Dict[str, Any], want: Dict[str, Any], prefix: str, source: str) -> None:
    """ConfigError naming the first tensor of `got` (a policy's weights) that is missing, extra, of another shape
    or dtype than `want` (the model's state_dict), or not finite. `prefix`: the tensors' names in the checkpoint."""
    import torch

    if not isinstance(got, dict):
        raise ConfigError("tensor", prefix.rstrip("."), f"a state_dict of the model's tensors ({source} holds "
                          f"a {type(got).__name__})")
    missing, extra = [n for n in want if n not in got], [n for n in got if n not in want]
    if missing or extra:
        name = (missing or extra)[0]
        raise ConfigError("tensor", f"{prefix}{name}", f"the weights of the model config.yaml describes, which "
                          f"{'has' if missing else 'has no'} this tensor ({source} {'lacks' if missing else 'holds'}"
                          f" it): a checkpoint of another model, or a damaged one")
    for name, target in want.items():
        tensor = got[name]
        if not isinstance(tensor, torch.Tensor) or tensor.shape != target.shape or tensor.dtype != target.dtype:
            held = f"{list(tensor.shape)} {tensor.dtype}" if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise ConfigError("tensor", f"{prefix}{name}", f"shape {list(target.shape)} and dtype {target.dtype}, "
                              f"as the model config.yaml describes ({source} holds {held}): a checkpoint of "
                              "another model, or a damaged one")
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ConfigError("tensor", f"{prefix}{name}", f"finite values ({source} holds NaN or infinite ones): "
                              "weights that diverged or were damaged")
