"""`sf-push` and `sf-pull`: a trained run as a Hugging Face Hub model repo, and back (the `hub` extra).

    sf-push experiment=cartpole repo=user/cartpole                 # upload train_dir/cartpole to the Hub
    sf-push experiment=cartpole repo=user/cartpole local_dir=out   # write the repo into out/, upload nothing
    sf-pull repo=user/cartpole                                     # into train_dir/cartpole (the repo's name)
    sf-pull local_dir=out experiment=cartpole2                     # a repo laid out in a folder

The repo: README.md (a model card: env, algo, model, frames trained, evaluation returns and their spread, the
command that reproduces the run and the one that plays it), config.yaml (the resolved config), spaces.json,
model.safetensors (every tensor of the learner's checkpoint: the weights under their state_dict names, the
optimizer's and generators' tensors under `checkpoint/...`), checkpoint.json (the rest of the checkpoint, the
tensors referred to by name), summary.json, the run's evaluation figures (eval/evaluations.jsonl,
enjoy/eval.json) and a replay video when the run has one. No pickle travels: `sf-pull` rebuilds
checkpoints/last.ckpt from the safetensors file and the JSON, so `python enjoy.py experiment=NAME` plays the
pulled run and `python train.py experiment=NAME ...` resumes it (optimizer state included).

Keys (key=value). sf-push: experiment (a run in train_dir) or run_dir, train_dir, repo (user/name; needed unless
local_dir), local_dir, kind (last: the newest learner state, or best), policy (with kind=best), private
(false). sf-pull: repo or local_dir (one), revision (with repo), experiment (default: the repo's name),
train_dir, overwrite (false: an existing run folder is refused). A bad key or value is refused naming it, with
exit status 2. Uploading goes through huggingface_hub (create_repo, then upload_folder); pulling through
snapshot_download, which honours HF_HUB_OFFLINE=1 and reads the client's cache.

A Sample Factory Hub repo (its config.json and checkpoint_p0/*.pth, as Sample Factory's push_to_hub uploads an
experiment folder) is pulled through sf-import-run's import (sf_hydra.app.import_sf_run): config imported,
weights mapped onto our model, its model card and replay kept."""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sf_hydra.app.import_sf_run import is_sf_folder
from sf_hydra.app.key_values import check_choice, check_index, check_one_of, parse_key_values, run_command
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.extras import install_lines
from sf_hydra.core.faults import Fault

log = logging.getLogger("sf_hydra")
PUSH_KEYS = {"experiment": None, "run_dir": None, "train_dir": "train_dir", "repo": None, "local_dir": None,
             "kind": "last", "policy": "0", "private": "false"}
PULL_KEYS = {"repo": None, "local_dir": None, "revision": None, "experiment": None, "train_dir": "train_dir",
             "overwrite": "false"}
WEIGHTS, CKPT_JSON, CARD = "model.safetensors", "checkpoint.json", "README.md"
TENSOR_PREFIX = "checkpoint/"  # safetensors keys of the checkpoint's tensors outside its state_dict
# Files copied as they are, run folder path -> repo path (the same), when the run has them.
COPIED = ("config.yaml", "spaces.json", "summary.json", "eval/evaluations.jsonl", "enjoy/eval.json",
          ".hydra/overrides.yaml")
VIDEO_SUFFIXES = (".mp4", ".gif")
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
HUB_MODULES = ("huggingface_hub", "safetensors")


# -- arguments ------------------------------------------------------------------------------------------------------
def parse(argv: Sequence[str], keys: Dict[str, Optional[str]], command: str) -> Dict[str, Optional[str]]:
    args = parse_key_values(argv, keys, command)
    for key in ("private", "overwrite"):
        if key in args and str(args[key]).lower() not in ("true", "false"):
            raise ConfigError(key, args[key], "true or false")
    if args.get("repo") is not None and not REPO_ID.match(args["repo"]):
        raise ConfigError("repo", args["repo"], "a Hub repo id: user/name (or org/name)")
    return args


def parse_push(argv: Sequence[str]) -> Dict[str, Optional[str]]:
    args = parse(argv, PUSH_KEYS, "sf-push")
    check_one_of(args, "experiment", "run_dir", "experiment=<a run in train_dir> or run_dir=<a run folder>")
    check_choice(args, "kind", {"last": "the run's newest learner state", "best": ""})
    check_index(args, "policy", "a trained policy's index")
    if not args["repo"] and not args["local_dir"]:
        raise ConfigError("repo", None, "user/name (the Hub repo to upload to), or local_dir=PATH to write the "
                          "repo into a folder and upload nothing")
    _need_extra()
    return args


def parse_pull(argv: Sequence[str]) -> Dict[str, Optional[str]]:
    args = parse(argv, PULL_KEYS, "sf-pull")
    if bool(args["repo"]) == bool(args["local_dir"]):
        raise ConfigError("repo", args["repo"], "exactly one of repo=user/name (from the Hub, or its cache with "
                          "HF_HUB_OFFLINE=1) or local_dir=<a repo written by sf-push local_dir=...>")
    if args["revision"] and not args["repo"]:
        raise ConfigError("revision", args["revision"], "only with repo=user/name")
    if args["experiment"] is not None and not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", args["experiment"]):
        raise ConfigError("experiment", args["experiment"], "a run folder's name (letters, digits, _ . -)")
    _need_extra()
    return args


def _need_extra() -> None:
    import importlib.util

    missing = [m for m in HUB_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError("hub", None, f"the hub extra (missing: {', '.join(missing)}): {install_lines('hub')}")


# -- the checkpoint as safetensors + JSON ---------------------------------------------------------------------------
def split_checkpoint(ckpt: Dict[str, Any]) -> Tuple[Dict[str, Any], Any]:
    """(tensors by name, the rest as JSON-able data): the state_dict's tensors keep their names; any other
    tensor becomes `checkpoint/<n>`, referred to as {"__tensor__": name}. Tuples and dicts with keys that are
    not strings (the optimizer's state, by parameter index) are tagged so that `join_checkpoint` restores them."""
    import torch

    tensors: Dict[str, Any] = {}

    def encode(obj):
        if isinstance(obj, torch.Tensor):
            name = f"{TENSOR_PREFIX}{len(tensors)}"
            tensors[name] = obj
            return {"__tensor__": name}
        if isinstance(obj, dict):
            if all(isinstance(k, str) and not k.startswith("__") for k in obj):
                return {k: encode(v) for k, v in obj.items()}
            return {"__dict__": [[encode(k), encode(v)] for k, v in obj.items()]}
        if isinstance(obj, tuple):
            return {"__tuple__": [encode(v) for v in obj]}
        if isinstance(obj, list):
            return [encode(v) for v in obj]
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        raise TypeError(f"a checkpoint value of type {type(obj).__name__} has no JSON form")

    tensors.update(ckpt.get("state_dict", {}))  # the weights first, under their own names
    data = {k: {"__state_dict__": list(v)} if k == "state_dict" else encode(v) for k, v in ckpt.items()}
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}
    return tensors, data


def join_checkpoint(tensors: Dict[str, Any], data: Any) -> Dict[str, Any]:
    """The checkpoint `split_checkpoint` took apart."""

    def decode(obj):
        if isinstance(obj, list):
            return [decode(v) for v in obj]
        if isinstance(obj, dict):
            if set(obj) == {"__tensor__"}:
                return tensors[obj["__tensor__"]]
            if set(obj) == {"__tuple__"}:
                return tuple(decode(v) for v in obj["__tuple__"])
            if set(obj) == {"__state_dict__"}:
                return {name: tensors[name] for name in obj["__state_dict__"]}
            if set(obj) == {"__dict__"}:
                return {decode(k): decode(v) for k, v in obj["__dict__"]}
            return {k: decode(v) for k, v in obj.items()}
        return obj

    return decode(data)


# -- push -----------------------------------------------------------------------------------------------------------
def run_folder(args: Dict[str, Optional[str]]) -> Path:
    path = Path(args["run_dir"]) if args["run_dir"] else Path(args["train_dir"]) / args["experiment"]
    if not (path / "config.yaml").is_file():
        key = "run_dir" if args["run_dir"] else "experiment"
        found = sorted(p.parent.name for p in Path(args["train_dir"]).glob("*/config.yaml"))
        raise ConfigError(key, args[key], f"a trained run folder with a config.yaml (in {args['train_dir']}: "
                          f"{found or 'none'})")
    return path


def pick_checkpoint(run_dir: Path, kind: str, policy: int) -> Path:
    from sf_hydra.core.run_dir import best_checkpoint_name, checkpoint_dir, resume_checkpoint

    if kind == "best":
        path = checkpoint_dir(run_dir) / best_checkpoint_name(policy)
        if not path.is_file():
            raise ConfigError("kind", kind, f"last: {run_dir} has no best checkpoint of policy {policy}")
        return path
    path = resume_checkpoint(run_dir)
    if path is None:
        raise ConfigError("run_dir", str(run_dir), "a run that saved a checkpoint (checkpoints/ is empty)")
    return path


def replay_video(run_dir: Path) -> Optional[Path]:
    """The newest video enjoy.py (or else evaluation during training) saved, if any."""
    for folder in (run_dir / "enjoy", run_dir / "eval"):
        videos = [p for p in folder.rglob("*") if p.suffix in VIDEO_SUFFIXES and p.is_file()] if folder.is_dir() \
            else []
        if videos:
            return max(videos, key=lambda p: (p.stat().st_mtime, p.name))
    return None


def evaluation(run_dir: Path, policy: int = 0) -> Optional[Dict[str, Any]]:
    """{mean, std, episodes, source, env_steps?}: the last evaluation during training of `policy`, else
    enjoy.py's eval.json; None when the run was never evaluated."""
    results = run_dir / "eval" / "evaluations.jsonl"
    if results.is_file():
        lines = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
        for record in reversed(lines):
            for entry in record.get("policies", [record]):
                if entry.get("policy", 0) == policy and "return" in entry:
                    return {"mean": entry["return"], "std": entry.get("return_std", 0.0),
                            "episodes": len(entry.get("episodes", [])), "env_steps": entry.get("env_steps"),
                            "source": "evaluation during training (eval/evaluations.jsonl)"}
    played = run_dir / "enjoy" / "eval.json"
    if played.is_file():
        result = json.loads(played.read_text())
        return {"mean": result["mean_return"], "std": result["std_return"], "episodes": len(result["episodes"]),
                "source": f"enjoy.py (enjoy/eval.json, deterministic={result.get('deterministic')})"}
    return None


def _overrides(run_dir: Path, experiment: str) -> List[str]:
    """The command line the run was trained with (.hydra/overrides.yaml), experiment=<its name> included."""
    from omegaconf import OmegaConf

    path = run_dir / ".hydra" / "overrides.yaml"
    items = [str(o) for o in OmegaConf.load(path)] if path.is_file() else []
    items = [o for o in items if not o.startswith(("experiment=", "train_dir="))]
    return [f"experiment={experiment}", *items]


def model_card(run_dir: Path, cfg, ckpt: Dict[str, Any], repo: str, video: Optional[str], kind: str,
               policy: int) -> str:
    from omegaconf import OmegaConf

    experiment = run_dir.name
    env_id = OmegaConf.select(cfg, "env.id", default=None) or OmegaConf.select(cfg, "env.name", default="unknown")
    family = OmegaConf.select(cfg, "env.family", default="")
    algo = "APPO" if OmegaConf.select(cfg, "algo.async_rl", default=True) else "PPO"
    model = OmegaConf.to_container(cfg.model, resolve=True) if "model" in cfg else {}
    frames = (ckpt.get("sf_hydra") or {}).get("env_steps")
    found = evaluation(run_dir, policy)
    recorded = (run_dir / ".hydra" / "overrides.yaml").is_file()
    overrides = " ".join(_overrides(run_dir, experiment))
    if found:
        figure = f"{found['mean']:.2f} +/- {found['std']:.2f}"
        result = (f"Mean return **{figure}** (mean +/- std over {found['episodes']} episodes), from "
                  f"{found['source']}" + (f" at {found['env_steps']} env steps" if found.get("env_steps") else "")
                  + ".")
        index = (f"model-index:\n- name: sf_hydra-{experiment}\n  results:\n  - task:\n      type: "
                 f"reinforcement-learning\n      name: reinforcement-learning\n    dataset:\n      name: {env_id}\n"
                 f"      type: {env_id}\n    metrics:\n    - type: mean_reward\n      value: {figure}\n"
                 f"      name: mean_reward\n")
    else:
        result, index = "Not evaluated: the run has no eval/evaluations.jsonl and no enjoy/eval.json.", ""
    lines = [
        "---", "library_name: sf_hydra", "tags:", "- reinforcement-learning", "- sf_hydra", f"- {env_id}", index
        + "---", "",
        f"# {algo} on {env_id} (sf_hydra)", "",
        f"A policy trained with sf_hydra's asynchronous PPO on `{env_id}` (env family `{family}`).", "",
        f"- env: `{env_id}`", f"- algo: {algo} (algo.async_rl={OmegaConf.select(cfg, 'algo.async_rl')}), "
        f"{OmegaConf.select(cfg, 'algo.num_policies', default=1)} policy(ies)",
        f"- model: `{json.dumps(model, sort_keys=True)}`",
        f"- frames (env steps) trained: {frames}",
        f"- checkpoint: {kind}" + (f" (policy {policy})" if kind == "best" else ""),
        f"- evaluation: {result}", "",
        "## Use it", "", "```bash",
        f"sf-pull repo={repo}                       # into train_dir/{experiment}",
        f"python enjoy.py experiment={experiment}          # play it (returns in train_dir/{experiment}/enjoy/)",
        f"python train.py {overrides} train_for_env_steps=<more>   # train on from it", "```", "",
        "## Reproduce it", "", "```bash", f"python train.py {overrides}", "```", "",
        *([] if recorded else ["The run's command line was not recorded (no .hydra/overrides.yaml): config.yaml "
                               "holds every value it trained with.", ""]),
        "Files: config.yaml (the resolved config), spaces.json, model.safetensors + checkpoint.json (the "
        "learner's state; sf-pull rebuilds checkpoints/last.ckpt from them)"
        + (f", {video} (a replay)" if video else "") + ".", ""]
    if video:
        lines[lines.index("## Use it"):lines.index("## Use it")] = [f"![replay]({video})", ""]
    return "\n".join(lines)


def write_repo(run_dir: Path, out: Path, kind: str = "last", policy: int = 0, repo: Optional[str] = None) -> Path:
    """The repo's files for `run_dir`, written into `out` (created; files already there are replaced)."""
    import torch
    from omegaconf import OmegaConf
    from safetensors.torch import save_file

    ckpt_path = pick_checkpoint(run_dir, kind, policy)
    ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    out.mkdir(parents=True, exist_ok=True)
    tensors, data = split_checkpoint(ckpt)
    save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt", "library": "sf_hydra",
                                                      "checkpoint": ckpt_path.name})
    (out / CKPT_JSON).write_text(json.dumps(data))
    for name in COPIED:
        if (run_dir / name).is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / name, out / name)
    video = replay_video(run_dir)
    video_name = f"replay{video.suffix}" if video else None
    if video:
        shutil.copyfile(video, out / video_name)
    cfg = OmegaConf.load(run_dir / "config.yaml")
    (out / CARD).write_text(model_card(run_dir, cfg, ckpt, repo or f"<user>/{run_dir.name}", video_name, kind,
                                       policy))
    return out


class UploadFailed(Fault):
    """The Hub refused the upload or could not be reached (no network, HF_HUB_OFFLINE=1, no token)."""


def upload(folder: Path, repo: str, private: bool) -> str:
    """create_repo, then upload_folder: the network path (unexercised by the tests: no network there)."""
    from huggingface_hub import HfApi

    api = HfApi()
    try:
        api.create_repo(repo_id=repo, repo_type="model", private=private, exist_ok=True)
        info = api.upload_folder(repo_id=repo, repo_type="model", folder_path=str(folder),
                                 commit_message="sf-push: a trained sf_hydra run")
    except Exception as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise UploadFailed(f"uploading to the Hub repo {repo} failed ({type(e).__name__}: {text}); log in with "
                           "`hf auth login` (or set HF_TOKEN), or write the repo into a folder with "
                           "local_dir=PATH") from None
    return str(getattr(info, "commit_url", info))


def push(args: Dict[str, Optional[str]]) -> str:
    run_dir = run_folder(args)
    policy, kind = int(args["policy"]), args["kind"]
    if args["local_dir"]:
        out = write_repo(run_dir, Path(args["local_dir"]), kind, policy, args["repo"])
        log.info("wrote the repo of %s into %s (nothing uploaded)", run_dir, out)
        return str(out)
    with tempfile.TemporaryDirectory(prefix="sf-push-") as tmp:
        write_repo(run_dir, Path(tmp), kind, policy, args["repo"])
        where = upload(Path(tmp), args["repo"], args["private"].lower() == "true")
    log.info("pushed %s to https://huggingface.co/%s (%s)", run_dir, args["repo"], where)
    return where


# -- pull -----------------------------------------------------------------------------------------------------------
def fetch_repo(repo: str, revision: Optional[str] = None) -> Path:
    """The repo's files: huggingface_hub's snapshot_download (the cache; with HF_HUB_OFFLINE=1 the cache only)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id=repo, revision=revision, repo_type="model"))
    except Exception as e:  # offline with no cached snapshot, an unknown repo, no network
        raise ConfigError("repo", repo, f"a model repo the Hub (or, offline, its cache) holds: "
                          f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}") from None


def lay_out(repo_dir: Path, run_dir: Path, overwrite: bool = False) -> Path:
    """The run folder of a repo: its files, and checkpoints/last.ckpt rebuilt from the safetensors + JSON."""
    import torch
    from safetensors.torch import load_file

    from sf_hydra.core.run_dir import LAST, checkpoint_dir

    for name in ("config.yaml", WEIGHTS, CKPT_JSON):
        if not (repo_dir / name).is_file():
            raise ConfigError("repo", str(repo_dir), f"a repo written by sf-push (it has no {name}), or a "
                              "Sample Factory one (config.json and checkpoint_p0/*.pth)")
    if run_dir.exists() and any(run_dir.iterdir()):
        if not overwrite:
            raise ConfigError("experiment", run_dir.name, f"a name with no run in {run_dir.parent} yet ({run_dir} "
                              "exists), or overwrite=true to replace it")
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        if (repo_dir / name).is_file():
            (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo_dir / name, run_dir / name)
    for suffix in VIDEO_SUFFIXES:
        if (repo_dir / f"replay{suffix}").is_file():
            (run_dir / "enjoy").mkdir(exist_ok=True)
            shutil.copyfile(repo_dir / f"replay{suffix}", run_dir / "enjoy" / f"replay{suffix}")
    if (repo_dir / CARD).is_file():
        shutil.copyfile(repo_dir / CARD, run_dir / CARD)
    ckpt = join_checkpoint(load_file(str(repo_dir / WEIGHTS)), json.loads((repo_dir / CKPT_JSON).read_text()))
    folder = checkpoint_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, folder / LAST)
    return run_dir


def lay_out_sample_factory(repo_dir: Path, run_dir: Path, overwrite: bool = False) -> Path:
    """The run folder of a Sample Factory Hub repo (its push_to_hub uploads the experiment folder: config.json,
    checkpoint_p0/*.pth, a model card, a replay): imported as sf-import-run imports the folder, its card and
    replay kept beside."""
    from sf_hydra.app.import_sf_run import import_run

    import_run(repo_dir, run_dir, overwrite=overwrite)
    if (repo_dir / CARD).is_file():
        shutil.copyfile(repo_dir / CARD, run_dir / CARD)
    for suffix in VIDEO_SUFFIXES:
        if (repo_dir / f"replay{suffix}").is_file():
            (run_dir / "enjoy").mkdir(exist_ok=True)
            shutil.copyfile(repo_dir / f"replay{suffix}", run_dir / "enjoy" / f"replay{suffix}")
    return run_dir


def pull(args: Dict[str, Optional[str]]) -> Path:
    if args["repo"]:
        repo_dir = fetch_repo(args["repo"], args["revision"])
        name = args["experiment"] or args["repo"].split("/", 1)[1]
    else:
        repo_dir = Path(args["local_dir"])
        if not repo_dir.is_dir():
            raise ConfigError("local_dir", args["local_dir"], "a folder sf-push local_dir=... wrote")
        name = args["experiment"] or repo_dir.resolve().name
    run_dir = Path(args["train_dir"]) / name
    overwrite = args["overwrite"].lower() == "true"
    if is_sf_folder(repo_dir) and not (repo_dir / "config.yaml").is_file():
        run_dir = lay_out_sample_factory(repo_dir, run_dir, overwrite)
    else:
        run_dir = lay_out(repo_dir, run_dir, overwrite)
    log.info("pulled %s into %s: python enjoy.py experiment=%s train_dir=%s plays it", args["repo"] or repo_dir,
             run_dir, name, args["train_dir"])
    return run_dir


# -- the commands ---------------------------------------------------------------------------------------------------
def _main(parse_fn, act, argv: Optional[List[str]]) -> int:
    return run_command(lambda args: act(parse_fn(args)), argv)


def push_main(argv: Optional[List[str]] = None) -> int:
    return _main(parse_push, push, argv)


def pull_main(argv: Optional[List[str]] = None) -> int:
    return _main(parse_pull, pull, argv)


if __name__ == "__main__":  # python -m sf_hydra.app.hub push|pull key=value ...
    if sys.argv[1:2] not in (["push"], ["pull"]):
        sys.exit("usage: python -m sf_hydra.app.hub push|pull key=value ... (sf-push, sf-pull)")
    sys.exit((push_main if sys.argv[1] == "push" else pull_main)(sys.argv[2:]))
