"""`sf-import-run <Sample Factory experiment folder> experiment=NAME`: a Sample Factory 2.x run as one of our run
folders, which `sf-enjoy experiment=NAME` plays and `sf-train experiment=NAME train_for_env_steps=N` trains on.

    sf-import-run train_dir_sf/doom_basic experiment=doom_basic            # -> train_dir/doom_basic
    sf-import-run sf_runs/cartpole experiment=cp checkpoint=best overwrite=true

The folder is Sample Factory's experiment folder (its config.json and checkpoint_p<k>/*.pth; a Sample Factory Hub
repo holds the same files). Its config goes through the config import (sf_hydra.app.sample_factory.translate:
every flag honoured or named), the config is composed as train.py composes it, the model it describes is built
from the env's spaces, and the checkpoint's weights are mapped onto it by name (app/sample_factory/weights.py):
a part of Sample Factory's model that ours does not have the same of is refused naming it. A Doom run also gets
the render settings of Sample Factory's own scenario files (SF_DOOM_RENDER: its doom_basic shows the status
bar), so that the policy sees the frames it was trained on. The run folder gets config.yaml, spaces.json and
checkpoints/last.ckpt: the weights and normalizers, the env steps and policy
version Sample Factory reached (what a resume counts on from), and Sample Factory's Adam moments re-indexed to
our parameters (fresh moments when its checkpoint holds none): training on takes the learning rate and the
rest of the config from the imported config, not Sample Factory's decayed `curr_lr`.

Keys (key=value): experiment (the run folder's name in train_dir; default: the Sample Factory folder's name),
train_dir, checkpoint (last: its newest checkpoint_*.pth; best: its newest best_*.pth), policy (which of its
policies, checkpoint_p<policy>/; default 0), overwrite (false: an existing run folder is refused). A bad key or
value, or a model that cannot be mapped, is refused naming it, with exit status 2.

The run is built beside its destination, checked as `sf-pull` checks a pulled run (its weights fit the model its
config describes and are finite) and only then renamed into place; a source folder with a symbolic link in it
is refused (sf_hydra.app.landing). Whatever fails leaves an old run folder as it was."""

from __future__ import annotations

import json
import logging
import math
import re
import sys
import time
import types
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sf_hydra.app.commands import COMMANDS
from sf_hydra.app.key_values import check_choice, check_index, parse_key_values, run_command
from sf_hydra.core.errors import ConfigError

log = logging.getLogger("sf_hydra")
KEYS = COMMANDS["sf-import-run"].defaults()
SF_CONFIG = "config.json"
# Sample Factory 2.1.1's Doom envs multiply the game's rewards by these (its DoomSpec's reward scaling; others 1):
# what it prints and saves as best_performance is in those units, ours are the game's (docs/guides/sample-factory.md).
SF_REWARD_SCALE = {"doom_basic": 0.01, "doom_deadly_corridor": 0.01}
SF_NOT_COMPARABLE = {"doom_health_gathering": "its own scenario file pays 0.01 per tic alive: compare tics alive"}
SF_NO_SCORE = -1e8  # a best_performance at or below this was never measured (Sample Factory starts it far below)
# Sample Factory's Doom envs load scenario .cfg files of its own, which render differently from ViZDoom's stock
# ones that ours load (doom_basic: the status bar shown, no decals or particles): its policies saw those frames.
# Per Sample Factory env, the DoomGame render settings its scenario file sets (read from sf_examples 2.1.1's
# scenarios/), applied through env.kwargs (DoomGame setters).
_HUD_WEAPON = {"render_hud": True, "render_crosshair": False, "render_weapon": True}
_NO_HUD = {"render_hud": False, "render_crosshair": False, "render_weapon": False}
_MULTIPLAYER = {"render_hud": True, "render_crosshair": True, "render_weapon": True}
_WEAPON_ONLY = {"render_hud": False, "render_crosshair": False, "render_weapon": True}
SF_DOOM_RENDER: Dict[str, Dict[str, bool]] = {
    **{name: _HUD_WEAPON for name in ("doom_basic", "doom_defend_the_center", "doom_defend_the_center_flat_actions",
                                       "doom_deadly_corridor", "doom_defend_the_line")},
    **{name: _NO_HUD for name in ("doom_two_colors_easy", "doom_two_colors_hard", "doom_health_gathering",
                                   "doom_health_gathering_supreme")},
    **{name: _MULTIPLAYER for name in ("doom_dm", "doom_dwango5", "doom_battle", "doom_battle2", "doom_duel_bots",
                                        "doom_deathmatch_bots", "doom_duel", "doom_deathmatch_full", "doom_benchmark")},
    **{name: _WEAPON_ONLY for name in ("doom_my_way_home", "doom_my_way_home_flat_actions")},
}


# -- arguments ------------------------------------------------------------------------------------------------------
def parse(argv: Sequence[str]) -> Dict[str, Optional[str]]:
    """The Sample Factory folder (the first argument without '=', or source=PATH) and the key=value arguments."""
    argv = list(argv)
    if argv and "=" not in argv[0]:
        argv[0] = f"source={argv[0]}"
    args = parse_key_values(argv, KEYS, "sf-import-run")
    if not args["source"]:
        raise ConfigError("source", None, "a Sample Factory experiment folder (its config.json and "
                          "checkpoint_p0/), as the first argument: sf-import-run <folder> experiment=NAME")
    check_choice(args, "checkpoint", {"last": "its newest checkpoint_*.pth", "best": "its newest best_*.pth"})
    check_index(args, "policy", "a policy of the Sample Factory run (its checkpoint_p<k>/ folder)")
    check_choice(args, "overwrite", {"false": "", "true": ""})
    if args["experiment"] is None:
        args["experiment"] = Path(args["source"]).resolve().name
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", args["experiment"]):
        raise ConfigError("experiment", args["experiment"], "a run folder's name (letters, digits, _ . -)")
    return args


def is_sf_folder(folder: Path) -> bool:
    """Whether `folder` looks like a Sample Factory experiment folder (or a Hub repo of one)."""
    return (folder / SF_CONFIG).is_file() and any(folder.glob("checkpoint_p*/*.pth"))


def sf_checkpoint(folder: Path, policy: int, kind: str) -> Path:
    """The checkpoint Sample Factory itself would load (--load_checkpoint_kind): the last by name of
    checkpoint_p<policy>/checkpoint_*.pth (train step first in the name), or of best_*.pth."""
    if not (folder / SF_CONFIG).is_file():
        raise ConfigError("source", str(folder), f"a Sample Factory experiment folder (it has no {SF_CONFIG})")
    pattern = "checkpoint_*.pth" if kind == "last" else "best_*.pth"
    found = sorted((folder / f"checkpoint_p{policy}").glob(pattern))
    if not found:
        have = sorted(p.name for p in folder.glob("checkpoint_p*"))
        there = (folder / f"checkpoint_p{policy}").is_dir()
        raise ConfigError("checkpoint" if there else "policy", kind if there else policy,
                          f"a checkpoint the run saved (checkpoint_p{policy}/{pattern}: none; it has "
                          f"{have or 'no checkpoint_p*/ folder'})")
    return found[-1]


# -- the config -----------------------------------------------------------------------------------------------------
def imported_overrides(sf_cfg: Dict[str, Any], experiment: str, train_dir: str) -> Tuple[List[str], List[str]]:
    """(our overrides for the run, the notes of what was dropped): the config import's, one policy, the place."""
    from sf_hydra.app.sample_factory.translate import import_config
    from sf_hydra.config.location import find_configs

    imported = import_config(sf_cfg, find_configs()[1])
    overrides = [o for o in imported.overrides() if not o.startswith(("experiment=", "algo.num_policies="))]
    render = SF_DOOM_RENDER.get(str(sf_cfg.get("env")), {})
    overrides += [f"++env.kwargs.{k}={str(v).lower()}" for k, v in {**render, "render_decals": False,
                                                                     "render_particles": False}.items()] \
        if render else []
    return overrides + ["algo.num_policies=1", f"experiment={experiment}", f"train_dir={train_dir}"], \
        imported.dropped


def compose_run_config(overrides: Sequence[str]):
    """The config train.py composes for these overrides, resolved, without Hydra's own node (what it saves)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, open_dict

    from sf_hydra.app.bad_input import Composer
    from sf_hydra.config import register_configs
    from sf_hydra.config.location import find_configs

    register_configs()
    composer = Composer(types.SimpleNamespace(config_name=None, config_dir=None, config_path=None),
                        find_configs()[0])
    try:
        cfg = composer.compose(list(overrides))
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        OmegaConf.resolve(cfg)
    finally:
        composer.close()
    return cfg


# -- the weights ----------------------------------------------------------------------------------------------------
def load_sf_checkpoint(path: Path) -> Dict[str, Any]:
    """Sample Factory's checkpoint dict (model, optimizer, train_step, env_steps, ...), read without unpickling
    code (torch.load weights_only)."""
    import torch

    try:
        with torch.serialization.safe_globals(numpy_scalar_globals()):
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, or pickled objects other than tensors and plain values
        raise ConfigError("checkpoint", str(path), f"a Sample Factory checkpoint torch.load(weights_only=True) "
                          f"reads ({type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''})")
    if not isinstance(state, dict) or "model" not in state:
        raise ConfigError("checkpoint", str(path), "a Sample Factory checkpoint (a dict with its `model`)")
    return state


def numpy_scalar_globals() -> list:
    """What a Sample Factory checkpoint pickles besides tensors and plain values: numpy scalars (its
    best_performance) and their dtypes, under numpy 1's name and numpy 2's."""
    import numpy as np

    try:
        from numpy._core.multiarray import scalar
    except ImportError:  # numpy 1
        from numpy.core.multiarray import scalar
    dtypes = [type(np.dtype(t)) for t in ("float64", "float32", "int64", "int32", "bool")]
    return [(scalar, "numpy.core.multiarray.scalar"), (scalar, "numpy._core.multiarray.scalar"), np.dtype, *dtypes]


def check_same_function(sf_cfg: Dict[str, Any], sf_model: Dict[str, Any], model) -> None:
    """What the names and shapes do not show: Sample Factory concatenates several observation keys' features in
    sorted key order (ours: the env's), and scales only the key `obs` (ours: every key)."""
    from sf_hydra.app.sample_factory.weights import UnmappablePart

    keys = list(model.encoder.encoders) if hasattr(model.encoder, "encoders") else []
    if len(keys) > 1:
        if any(k.startswith("encoder.basic_encoder.") for k in sf_model):
            raise UnmappablePart("encoder.measurements_head (the Doom encoder's measurements)",
                                 f"our encoder encodes each of {keys} with the model's own layers")
        if keys != sorted(keys):
            raise UnmappablePart("encoder.encoders (MultiInputEncoder)", f"Sample Factory concatenates the keys' "
                                 f"features in sorted order {sorted(keys)}, ours in the env's {keys}")
        if float(sf_cfg.get("obs_scale", 1.0)) != 1.0 or float(sf_cfg.get("obs_subtract_mean", 0.0)) != 0.0:
            raise UnmappablePart("obs_normalizer", "Sample Factory scales only the key `obs` (obs_scale, "
                                 "obs_subtract_mean), ours every key of a dict observation")


def learner_state(cfg, model, sf_ckpt: Dict[str, Any]) -> Dict[str, Any]:
    """Our learner checkpoint (what train.py resumes and Policy.load reads) for one policy, `model` (the imported
    weights loaded):
    Sample Factory's env steps and train step (our policy version), its Adam moments re-indexed to our
    parameters, the optimizer's groups as our config sets them, no episodes yet."""
    import lightning
    import torch

    from sf_hydra.app.sample_factory.weights import map_adam_state
    from sf_hydra.core.run_dir import SAVED_AT_KEY

    names = [n for n, _ in model.named_parameters()]
    algo = cfg.algo
    opt = torch.optim.Adam(model.parameters(), lr=algo.learning_rate, eps=algo.adam_eps,
                           betas=(algo.adam_beta1, algo.adam_beta2))
    moments = map_adam_state(sf_ckpt.get("optimizer"), sf_ckpt["model"], names)
    optimizer_state = opt.state_dict()
    optimizer_state["state"] = moments
    env_steps, version = int(sf_ckpt.get("env_steps", 0)), int(sf_ckpt.get("train_step", 0))
    none = {"episode_returns": [], "episode_lengths": [], "episodes_total": 0}
    return {
        "epoch": 0, "global_step": 0, "pytorch-lightning_version": lightning.__version__,
        "state_dict": {f"policies.0.{k}": v for k, v in model.state_dict().items()},  # our order
        "optimizer_states": [optimizer_state], "lr_schedulers": [],
        SAVED_AT_KEY: time.time(),
        "sf_hydra": {"policy_version": version, "env_steps": env_steps, "train_seconds": 0.0, **none,
                     "policies": [{"version": version, "env_steps": env_steps, **none}]},
        "sf_hydra_imported": {"from": "sample_factory", "train_step": version, "env_steps": env_steps,
                              "adam_moments": bool(moments), "curr_lr": _plain(sf_ckpt.get("curr_lr")),
                              "best_performance": _plain(sf_ckpt.get("best_performance"))},
    }


def _plain(value) -> Optional[float]:
    """A number as a plain float (a checkpoint of ours loads with weights_only: no numpy scalars in it)."""
    return None if value is None else float(value)


# -- the import -----------------------------------------------------------------------------------------------------
def import_run(source: Path, run_dir: Path, checkpoint: str = "last", policy: int = 0,
               overwrite: bool = False) -> Path:
    """The run folder `run_dir` made from the Sample Factory experiment folder `source` (module docstring): built
    beside `run_dir`, checked as a pulled run is, then swapped into place (sf_hydra.app.landing); an old run
    (`overwrite`) is removed only once the new one is in place, and left as it was when anything fails."""
    from sf_hydra.app.landing import check_landed, refuse_existing, refuse_links, written_aside

    refuse_existing(run_dir, overwrite)
    refuse_links(source, "source")
    with written_aside(run_dir) as folder:
        weights = import_into(source, run_dir, folder, checkpoint, policy)
        check_landed(folder, weights)
    log.info("imported %s into %s: sf-enjoy experiment=%s train_dir=%s plays it", weights, run_dir, run_dir.name,
             run_dir.parent)
    return run_dir


def import_into(source: Path, run_dir: Path, folder: Path, checkpoint: str = "last", policy: int = 0) -> str:
    """The files of the run folder `run_dir` (its name and place go into its config) made from the Sample Factory
    experiment folder `source`, written into `folder`. Returns the checkpoint the weights came from."""
    import torch

    from sf_hydra.app.resume_config import save_config
    from sf_hydra.app.sample_factory.weights import map_weights
    from sf_hydra.core.run_dir import LAST, checkpoint_dir, save_spaces
    from sf_hydra.models import build_model, model_recipe
    from sf_hydra.sampler.env_info import describe_env

    ckpt_path = sf_checkpoint(source, policy, checkpoint)
    sf_cfg = read_sf_config(source / SF_CONFIG)
    overrides, dropped = imported_overrides(sf_cfg, run_dir.name, str(run_dir.parent))
    for note in dropped:
        log.info("config import: %s", note)
    sf_ckpt = load_sf_checkpoint(ckpt_path)
    cfg = compose_run_config(overrides)
    info = describe_env(cfg.env, seed=cfg.seed)
    model = build_model(model_recipe(cfg), info.observation_space, info.action_space)
    check_same_function(sf_cfg, sf_ckpt["model"], model)
    weights = map_weights(sf_ckpt["model"], model.state_dict())
    model.load_state_dict(weights)
    state = learner_state(cfg, model, sf_ckpt)
    checkpoint_dir(folder).mkdir(parents=True, exist_ok=True)
    save_config(cfg, folder)
    save_spaces(folder, info.observation_space, info.action_space, info.num_agents)
    torch.save(state, checkpoint_dir(folder) / LAST)
    (folder / "imported_from.json").write_text(json.dumps({
        "source": str(source.resolve()), "checkpoint": str(ckpt_path.resolve()), "overrides": overrides,
        "env_steps": state["sf_hydra"]["env_steps"], "adam_moments": state["sf_hydra_imported"]["adam_moments"],
    }, indent=1))
    log.info("imported %s: %s env steps", ckpt_path, state["sf_hydra"]["env_steps"])
    log.info("%s", sf_score_line(str(sf_cfg.get("env")), state["sf_hydra_imported"]["best_performance"]))
    log.info("%s", budget_line(cfg, state["sf_hydra"]["env_steps"]))
    return str(ckpt_path)


def sf_score_line(env: str, best: Optional[float]) -> str:
    """Sample Factory's best average return as its checkpoint saved it, and in our units (the game's own rewards:
    Sample Factory's Doom envs scale theirs, SF_REWARD_SCALE)."""
    if best is None or not math.isfinite(best) or best <= SF_NO_SCORE:
        return "Sample Factory's checkpoint holds no score (best_performance)"
    if env in SF_NOT_COMPARABLE:
        return f"Sample Factory's best average return: {best:.4g} in its units ({SF_NOT_COMPARABLE[env]})"
    scale = SF_REWARD_SCALE.get(env, 1.0)
    note = f" (its {env} env multiplies rewards by {scale:g})" if scale != 1.0 else ""
    return f"Sample Factory's best average return: {best:.4g} in its units, {best / scale:.4g} in ours{note}"


def budget_line(cfg, env_steps: int) -> str:
    """The budgets the imported run now has (those of Sample Factory's config.json): what stops training on it."""
    return (f"budgets kept from Sample Factory's config.json: train_for_env_steps={cfg.train_for_env_steps} "
            f"({env_steps} reached), train_for_seconds={cfg.train_for_seconds:g} (counted from this import); type "
            f"larger ones to train on: sf-train experiment={Path(cfg.run_dir).name} train_for_env_steps=...")


def read_sf_config(path: Path) -> Dict[str, Any]:
    """Sample Factory's config.json: a ConfigError naming the file when it is not a JSON object."""
    from sf_hydra.app.landing import why

    try:
        sf_cfg = json.loads(path.read_text())
    except ValueError as e:  # truncated, not JSON, or not UTF-8
        raise ConfigError(SF_CONFIG, str(path), f"Sample Factory's config as JSON that parses ({why(e)})") from None
    if not isinstance(sf_cfg, dict):
        raise ConfigError(SF_CONFIG, str(path), "Sample Factory's config: a JSON object")
    return sf_cfg


def import_command(argv: List[str]) -> None:
    """sf-import-run's arguments checked, then the import."""
    args = parse(argv)
    import_run(Path(args["source"]), Path(args["train_dir"]) / args["experiment"], args["checkpoint"],
               int(args["policy"]), args["overwrite"] == "true")


def main(argv: Optional[List[str]] = None) -> int:
    """The `sf-import-run` entry point: exit status 0, or 2 for a bad key or value or a model that cannot be
    mapped (key_values.run_command)."""
    return run_command(import_command, argv, "sf-import-run")


if __name__ == "__main__":
    sys.exit(main())
