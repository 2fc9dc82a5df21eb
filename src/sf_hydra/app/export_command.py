"""`sf-export experiment=NAME format=onnx|torchscript`: a trained policy as one file for another runtime, and a
JSON beside it, named after it, that says how to call it and holds its sha256 (sf_hydra.evaluation.export). Both
are written aside and renamed into place: an export cut short leaves the previous one whole.

    sf-export experiment=cartpole format=onnx                  # train_dir/cartpole/export/policy_0.onnx (+ .onnx.json)
    sf-export run_dir=train_dir/multirun/x/0 format=torchscript policy=1 kind=best out=agent.pt

Keys (key=value, as the other commands take them): experiment (a run in train_dir) or run_dir (a run folder or a
checkpoint file), format, policy (default 0), kind (last: the newest checkpoint, or best), out (default:
<run>/export/policy_<k>.<onnx|pt>), trusted_targets (code a run from elsewhere may name: [mylab.envs, ...];
docs/guides/security.md). A bad key or value is refused naming it, with exit status 2."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from sf_hydra.app.commands import COMMANDS
from sf_hydra.app.key_values import check_choice, check_index, check_one_of, listed, parse_key_values, run_command
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.extras import install_lines

log = logging.getLogger("sf_hydra")
KEYS = COMMANDS["sf-export"].defaults()
FORMATS = ("onnx", "torchscript")
EXTRA_OF = {"onnx": ("onnx", "onnxscript", "onnxruntime")}  # what format=onnx needs (the `export` extra)


def parse(argv: Sequence[str]) -> Dict[str, Optional[str]]:
    """key=value arguments against KEYS, each checked before anything is loaded."""
    args = parse_key_values(argv, KEYS, "sf-export")
    check_choice(args, "format", {f: "" for f in FORMATS})
    check_choice(args, "kind", {"last": "the run's newest checkpoint", "best": ""})
    check_index(args, "policy", "a trained policy's index")
    check_one_of(args, "experiment", "run_dir", "experiment=<a run in train_dir> or run_dir=<a run folder or "
                 "checkpoint file>")
    missing = [m for m in EXTRA_OF.get(args["format"], ()) if not _installed(m)]
    if missing:
        raise ConfigError("format", args["format"], f"torchscript, or ONNX with the export extra (missing: "
                          f"{', '.join(missing)}): {install_lines('export')}")
    return args


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def source(args: Dict[str, Optional[str]]) -> Path:
    path = Path(args["run_dir"]) if args["run_dir"] else Path(args["train_dir"]) / args["experiment"]
    if not path.exists():
        key = "run_dir" if args["run_dir"] else "experiment"
        found = sorted(p.parent.name for p in Path(args["train_dir"]).glob("*/config.yaml"))
        raise ConfigError(key, args[key], f"a trained run (in {args['train_dir']}: {found or 'none'})")
    return path


def export_command(argv: List[str]) -> None:
    args = parse(argv)
    path = source(args)
    from sf_hydra.evaluation.export import default_path, export
    from sf_hydra.evaluation.policy import Policy

    policy = Policy.load(path, policy=int(args["policy"]), kind=args["kind"],
                         trusted_targets=listed(args["trusted_targets"]))
    written, described = export(policy, args["format"], default_path(policy, args["format"], args["out"]))
    log.info("exported policy %d of %s (%s env steps) as %s: %s, how to call it: %s", policy.origin.policy,
             policy.origin.checkpoint, policy.origin.env_steps, args["format"], written, described)


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(export_command, argv, "sf-export")


if __name__ == "__main__":
    sys.exit(main())
