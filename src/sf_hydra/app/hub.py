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

No value that came from an environment variable is pushed: config.yaml holds such values as their
`${oc.env:...}` interpolation (sf_hydra.app.resume_config.save_config), and the overrides that read one are left
out of .hydra/overrides.yaml and of the model card's command lines; sf-push says what it left out.
`local_dir=X` writes the repo into a hidden folder beside X and swaps it in whole, under a lock beside X: two
pushes into one folder at once leave one of them, and nothing of an earlier push stays behind (a folder that
holds files sf-push does not write is refused, not replaced).

A pull checks everything before it touches anything (sf_hydra.app.landing): the run is built in a hidden folder
beside its destination, its config parsed, its checkpoint rebuilt and its weights loaded into the model the
config describes (shapes, dtypes, finite values), and only then renamed into place; an old run under
`overwrite=true` is removed only once the new one is in place. A source folder with a symbolic link in it is
refused (links into huggingface_hub's own cache excepted: a snapshot is laid out so). Each refusal is one line
naming the file, exit status 2, and the old run as it was.

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

from sf_hydra.app.commands import COMMANDS
from sf_hydra.app.import_sf_run import is_sf_folder
from sf_hydra.app.key_values import check_choice, check_index, check_one_of, listed, parse_key_values, run_command
from sf_hydra.app.landing import check_landed, read_config, refuse_existing, refuse_links, why, written_aside
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.extras import install_lines
from sf_hydra.core.faults import Fault

log = logging.getLogger("sf_hydra")
PUSH_KEYS = COMMANDS["sf-push"].defaults()
PULL_KEYS = COMMANDS["sf-pull"].defaults()
WEIGHTS, CKPT_JSON, CARD = "model.safetensors", "checkpoint.json", "README.md"
TENSOR_PREFIX = "checkpoint/"  # safetensors keys of the checkpoint's tensors outside its state_dict
# Files copied as they are, run folder path -> repo path (the same), when the run has them.
COPIED = ("config.yaml", "spaces.json", "summary.json", "eval/evaluations.jsonl", "enjoy/eval.json",
          ".hydra/overrides.yaml")
VIDEO_SUFFIXES = (".mp4", ".gif")
OVERRIDES = ".hydra/overrides.yaml"
ENV_LEFT_OUT = "<read from an environment variable: not pushed>"  # what the card shows for such a value
# What a repo folder holds (its top level): a folder with anything else is not replaced by sf-push local_dir=.
REPO_NAMES = {WEIGHTS, CKPT_JSON, CARD, *(name.split("/")[0] for name in COPIED),
              *(f"replay{suffix}" for suffix in VIDEO_SUFFIXES)}
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


def recorded_overrides(run_dir: Path) -> Tuple[List[str], List[str]]:
    """(the overrides the run was trained with, .hydra/overrides.yaml's, those that read an environment variable
    left out; the ones left out)."""
    import yaml

    from sf_hydra.app.resume_config import reads_environment

    path = run_dir / OVERRIDES
    items = [str(o) for o in yaml.safe_load(path.read_text()) or []] if path.is_file() else []
    return [o for o in items if not reads_environment(o)], [o for o in items if reads_environment(o)]


def _overrides(run_dir: Path, experiment: str) -> List[str]:
    """The command line the run was trained with (recorded_overrides), experiment=<its name> included."""
    items = [o for o in recorded_overrides(run_dir)[0] if not o.startswith(("experiment=", "train_dir="))]
    return [f"experiment={experiment}", *items]


def model_card(run_dir: Path, cfg, ckpt: Dict[str, Any], repo: str, video: Optional[str], kind: str,
               policy: int) -> str:
    from omegaconf import OmegaConf

    experiment = run_dir.name
    env_id = OmegaConf.select(cfg, "env.id", default=None) or OmegaConf.select(cfg, "env.name", default="unknown")
    family = OmegaConf.select(cfg, "env.family", default="")
    algo = "APPO" if cfg.algo.async_rl else "PPO"
    model = OmegaConf.to_container(cfg.model, resolve=True)
    frames = (ckpt.get("sf_hydra") or {}).get("env_steps")
    found = evaluation(run_dir, policy)
    recorded = (run_dir / OVERRIDES).is_file()
    overrides = " ".join(_overrides(run_dir, experiment))
    left_out = len(recorded_overrides(run_dir)[1])
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
        f"- env: `{env_id}`", f"- algo: {algo} (algo.async_rl={cfg.algo.async_rl}), "
        f"{cfg.algo.num_policies} policy(ies)",
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
        *([f"Left out of these command lines: {left_out} override(s) that read an environment variable (set "
           "your own value)."] if left_out else []),
        "Files: config.yaml (the resolved config), spaces.json, model.safetensors + checkpoint.json (the "
        "learner's state; sf-pull rebuilds checkpoints/last.ckpt from them)"
        + (f", {video} (a replay)" if video else "") + ".", ""]
    if video:
        lines[lines.index("## Use it"):lines.index("## Use it")] = [f"![replay]({video})", ""]
    return "\n".join(lines)


def write_repo(run_dir: Path, out: Path, kind: str = "last", policy: int = 0, repo: Optional[str] = None) -> Path:
    """The repo's files for `run_dir`, written into `out` (created; files already there are replaced). No value
    from an environment variable goes in (say_left_out)."""
    import torch
    import yaml
    from omegaconf import OmegaConf
    from safetensors.torch import save_file

    from sf_hydra.app.resume_config import environment_keys, without_environment
    from sf_hydra.config.saved import with_schema_defaults

    written = OmegaConf.to_container(read_config(run_dir / "config.yaml"), resolve=False)  # a framed refusal
    ckpt_path = pick_checkpoint(run_dir, kind, policy)
    ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    out.mkdir(parents=True, exist_ok=True)
    tensors, data = split_checkpoint(ckpt)
    save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt", "library": "sf_hydra",
                                                      "checkpoint": ckpt_path.name})
    (out / CKPT_JSON).write_text(json.dumps(data))
    for name in COPIED:
        if (run_dir / name).is_file() and name != OVERRIDES:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / name, out / name)
    kept, left_out = recorded_overrides(run_dir)
    if (run_dir / OVERRIDES).is_file():
        (out / OVERRIDES).parent.mkdir(parents=True, exist_ok=True)
        (out / OVERRIDES).write_text(yaml.safe_dump(kept))
    video = replay_video(run_dir)
    video_name = f"replay{video.suffix}" if video else None
    if video:
        shutil.copyfile(video, out / video_name)
    # the card never resolves a value from the environment; a run saved by an older sf_hydra gets today's keys
    cfg = with_schema_defaults(OmegaConf.create(without_environment(written, ENV_LEFT_OUT)))
    (out / CARD).write_text(model_card(run_dir, cfg, ckpt, repo or f"<user>/{run_dir.name}", video_name, kind,
                                       policy))
    say_left_out(environment_keys(written), left_out)
    return out


def say_left_out(keys: List[str], overrides: List[str]) -> None:
    """One line for the run's values that read environment variables: the overrides left out of the repo, the
    config keys whose interpolation config.yaml keeps unresolved."""
    said = ([f"left out of {OVERRIDES} and the model card: {', '.join(overrides)}"] if overrides else []) + \
        ([f"kept unresolved in config.yaml: {', '.join(keys)}"] if keys else [])
    if said:
        log.warning("values read from environment variables are not pushed: %s", "; ".join(said))


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
        out = Path(args["local_dir"])
        refuse_foreign(out)
        with written_aside(out) as folder:
            write_repo(run_dir, folder, kind, policy, args["repo"])
        log.info("wrote the repo of %s into %s (nothing uploaded)", run_dir, out)
        return str(out)
    with tempfile.TemporaryDirectory(prefix="sf-push-") as tmp:
        write_repo(run_dir, Path(tmp), kind, policy, args["repo"])
        where = upload(Path(tmp), args["repo"], args["private"].lower() == "true")
    log.info("pushed %s to https://huggingface.co/%s (%s)", run_dir, args["repo"], where)
    return where


def refuse_foreign(out: Path) -> None:
    """ConfigError when `out` is a file, or a folder that holds anything sf-push does not write (REPO_NAMES): it
    is replaced whole, and a folder of the user's own is not sf-push's to replace."""
    if out.is_file():
        raise ConfigError("local_dir", str(out), "a folder to write the repo into (this is a file)")
    foreign = sorted(p.name for p in out.iterdir() if p.name not in REPO_NAMES) if out.is_dir() else []
    if foreign:
        raise ConfigError("local_dir", str(out), f"a new or empty folder, or one sf-push wrote (this one holds "
                          f"{', '.join(foreign[:5])}, which sf-push does not write; the folder is replaced whole)")


# -- pull -----------------------------------------------------------------------------------------------------------
def fetch_repo(repo: str, revision: Optional[str] = None) -> Path:
    """The repo's files: huggingface_hub's snapshot_download (the cache; with HF_HUB_OFFLINE=1 the cache only)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id=repo, revision=revision, repo_type="model"))
    except Exception as e:  # offline with no cached snapshot, an unknown repo, no network
        raise ConfigError("repo", repo, f"a model repo the Hub (or, offline, its cache) holds: "
                          f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}") from None


def lay_out(repo_dir: Path, folder: Path, key: str = "repo") -> None:
    """The run folder of a repo written into `folder`: its files, and checkpoints/last.ckpt rebuilt from the
    safetensors + JSON. `key`: the argument that named the repo (repo, local_dir), for the refusal."""
    import torch

    from sf_hydra.core.run_dir import LAST, checkpoint_dir

    for name in ("config.yaml", WEIGHTS, CKPT_JSON):
        if not (repo_dir / name).is_file():
            raise ConfigError(key, str(repo_dir), f"a repo written by sf-push (it has no {name}), or a "
                              "Sample Factory one (config.json and checkpoint_p0/*.pth)")
    ckpt = rebuilt_checkpoint(repo_dir)
    for name in COPIED:
        if (repo_dir / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo_dir / name, folder / name)
    _keep_card_and_replay(repo_dir, folder)
    checkpoint_dir(folder).mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, checkpoint_dir(folder) / LAST)


def rebuilt_checkpoint(repo_dir: Path) -> Dict[str, Any]:
    """The learner checkpoint of a repo, from its safetensors file and checkpoint.json: a ConfigError naming the
    file that does not parse or does not make a checkpoint."""
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(repo_dir / WEIGHTS))
    except Exception as e:  # truncated, or not a safetensors file
        raise ConfigError(WEIGHTS, str(repo_dir / WEIGHTS), f"a safetensors file ({why(e)})") from None
    try:
        data = json.loads((repo_dir / CKPT_JSON).read_text())
    except ValueError as e:  # truncated, not JSON, or not UTF-8
        raise ConfigError(CKPT_JSON, str(repo_dir / CKPT_JSON), f"JSON that parses ({why(e)})") from None
    try:
        ckpt = join_checkpoint(tensors, data)
    except (KeyError, TypeError, ValueError) as e:  # a tensor it names that the safetensors file lacks, a bad tag
        raise ConfigError(CKPT_JSON, str(repo_dir / CKPT_JSON), f"a checkpoint sf-push wrote, whose tensors are in "
                          f"{WEIGHTS} ({why(e)})") from None
    if not isinstance(ckpt, dict):
        raise ConfigError(CKPT_JSON, str(repo_dir / CKPT_JSON), "a checkpoint sf-push wrote (a JSON object)")
    return ckpt


def _keep_card_and_replay(repo_dir: Path, folder: Path) -> None:
    """The repo's model card beside the run, its replay in enjoy/ (where enjoy.py keeps its videos)."""
    if (repo_dir / CARD).is_file():
        shutil.copyfile(repo_dir / CARD, folder / CARD)
    for suffix in VIDEO_SUFFIXES:
        if (repo_dir / f"replay{suffix}").is_file():
            (folder / "enjoy").mkdir(exist_ok=True)
            shutil.copyfile(repo_dir / f"replay{suffix}", folder / "enjoy" / f"replay{suffix}")


def lay_out_sample_factory(repo_dir: Path, run_dir: Path, folder: Path) -> str:
    """The run folder `run_dir` of a Sample Factory Hub repo (its push_to_hub uploads the experiment folder:
    config.json, checkpoint_p0/*.pth, a model card, a replay), written into `folder`: imported as sf-import-run
    imports the folder, its card and replay kept beside. Returns where its weights came from."""
    from sf_hydra.app.import_sf_run import import_into

    weights = import_into(repo_dir, run_dir, folder)
    _keep_card_and_replay(repo_dir, folder)
    return weights


def _source(args: Dict[str, Optional[str]]) -> Tuple[Path, str, Optional[Path]]:
    """(the repo's folder, the run's default name, the folder links in it may point into: the Hub cache's blobs)."""
    if args["repo"]:
        repo_dir = fetch_repo(args["repo"], args["revision"])
        blobs = repo_dir.parent.parent / "blobs" if repo_dir.parent.name == "snapshots" else None
        return repo_dir, args["repo"].split("/", 1)[1], blobs
    repo_dir = Path(args["local_dir"])
    if not repo_dir.is_dir():
        raise ConfigError("local_dir", args["local_dir"], "a folder sf-push local_dir=... wrote")
    return repo_dir, repo_dir.resolve().name, None


def pull(args: Dict[str, Optional[str]]) -> Path:
    """The repo laid out in a folder beside the run's, checked, then swapped into place (sf_hydra.app.landing)."""
    repo_dir, name, blobs = _source(args)
    name = args["experiment"] or name
    run_dir = Path(args["train_dir"]) / name
    refuse_existing(run_dir, args["overwrite"].lower() == "true")
    refuse_links(repo_dir, "repo" if args["repo"] else "local_dir", blobs)
    with written_aside(run_dir) as folder:
        if is_sf_folder(repo_dir) and not (repo_dir / "config.yaml").is_file():
            weights = lay_out_sample_factory(repo_dir, run_dir, folder)
        else:
            lay_out(repo_dir, folder, "repo" if args["repo"] else "local_dir")
            weights = str(repo_dir / WEIGHTS)
        check_landed(folder, weights, listed(args["trusted_targets"]))
    log.info("pulled %s into %s: python enjoy.py experiment=%s train_dir=%s plays it", args["repo"] or repo_dir,
             run_dir, name, args["train_dir"])
    return run_dir


# -- the commands ---------------------------------------------------------------------------------------------------
def _main(parse_fn, act, argv: Optional[List[str]], prog: str) -> int:
    return run_command(lambda args: act(parse_fn(args)), argv, prog)


def push_main(argv: Optional[List[str]] = None) -> int:
    return _main(parse_push, push, argv, "sf-push")


def pull_main(argv: Optional[List[str]] = None) -> int:
    return _main(parse_pull, pull, argv, "sf-pull")


if __name__ == "__main__":  # python -m sf_hydra.app.hub push|pull key=value ...
    if sys.argv[1:2] not in (["push"], ["pull"]):
        sys.exit("usage: python -m sf_hydra.app.hub push|pull key=value ... (sf-push, sf-pull)")
    sys.exit((push_main if sys.argv[1] == "push" else pull_main)(sys.argv[2:]))
