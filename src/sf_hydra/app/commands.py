"""The commands that take `key=value` arguments rather than Hydra's (sf-export, sf-push, sf-pull, sf-import-run):
each one's keys with their defaults and meanings, and examples. One table, read three ways: the commands take
their keys and defaults from it, `--help` (or `-h`) prints it, and docs/reference/commands.md is generated from it
(`python -m sf_hydra.app.commands > docs/reference/commands.md`; a test checks the page is this output)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class Key:
    name: str
    default: Optional[str]
    meaning: str


@dataclass(frozen=True)
class Command:
    prog: str  # the console script
    module: str  # the same command as `python -m <module>`
    what: str  # one sentence
    keys: Tuple[Key, ...]
    examples: Tuple[str, ...]
    first: Optional[str] = None  # the key a first argument without '=' gives (sf-import-run's folder)

    def defaults(self) -> Dict[str, Optional[str]]:
        return {k.name: k.default for k in self.keys}

    def help(self) -> str:
        usage = f"usage: {self.prog} {f'<{self.first}> ' if self.first else ''}key=value ..."
        width = max(len(k.name) for k in self.keys) + 2
        rows = [f"  {k.name:<{width}}{k.meaning}" + (f" (default: {k.default})" if k.default is not None else "")
                for k in self.keys]
        return "\n".join([usage, "", self.what, "", "keys:", *rows, "", "examples:",
                          *(f"  {e}" for e in self.examples), "",
                          f"(also: python -m {self.module} ...; a bad key or value is refused naming it, exit "
                          "status 2)"])


RUN = Key("experiment", None, "a run in train_dir (or run_dir=)")
RUN_DIR = Key("run_dir", None, "a run folder (or a checkpoint file inside one), instead of experiment=")
TRAIN_DIR = Key("train_dir", "train_dir", "where runs live")
POLICY = Key("policy", "0", "which trained policy (0, 1, ...)")
TRUSTED = Key("trusted_targets", None, "code a run from elsewhere may name beyond sf_hydra's own parts: "
                                       "[mylab.envs,mylab.models.MyNet] (docs/guides/security.md)")

COMMANDS: Dict[str, Command] = {c.prog: c for c in (
    Command("sf-export", "sf_hydra.app.export_command",
            "A trained policy as one file for another runtime (ONNX or TorchScript), with a description beside it "
            "that says how to call it.",
            (RUN, RUN_DIR, TRAIN_DIR, Key("format", None, "onnx (the export extra) or torchscript"), POLICY,
             Key("kind", "last", "last: the newest checkpoint; best: the policy's best checkpoint"),
             Key("out", None, "the file to write (default: <run>/export/policy_<k>.<onnx|pt>)"), TRUSTED),
            ("sf-export experiment=cartpole format=onnx",
             "sf-export run_dir=train_dir/multirun/x/0 format=torchscript policy=1 kind=best out=agent.pt")),
    Command("sf-push", "sf_hydra.app.hub push",
            "A trained run as a Hugging Face Hub model repo (the hub extra): model card, config, weights as "
            "safetensors + JSON, evaluation figures, replay.",
            (RUN, RUN_DIR, TRAIN_DIR, Key("repo", None, "the Hub repo user/name (needed unless local_dir=)"),
             Key("local_dir", None, "write the repo into this folder and upload nothing"),
             Key("kind", "last", "last: the newest learner state; best: the policy's best checkpoint"), POLICY,
             Key("private", "false", "create the Hub repo private")),
            ("sf-push experiment=cartpole repo=me/cartpole",
             "sf-push experiment=cartpole repo=me/cartpole local_dir=hub/cartpole")),
    Command("sf-pull", "sf_hydra.app.hub pull",
            "A run from the Hugging Face Hub (or a folder sf-push wrote) laid out as a run folder, checked before it "
            "is put in place: enjoy.py plays it, train.py resumes it.",
            (Key("repo", None, "the Hub repo user/name (or local_dir=)"),
             Key("local_dir", None, "a repo written by sf-push local_dir=..., instead of repo="),
             Key("revision", None, "a branch, tag or commit of repo"),
             Key("experiment", None, "the run folder's name in train_dir (default: the repo's name)"), TRAIN_DIR,
             Key("overwrite", "false", "replace an existing run folder of that name"), TRUSTED),
            ("sf-pull repo=me/cartpole", "sf-pull local_dir=hub/cartpole experiment=cartpole_pulled")),
    Command("sf-import-run", "sf_hydra.app.import_sf_run",
            "A Sample Factory 2.x experiment folder (config.json, checkpoint_p<k>/*.pth) as one of our run folders, "
            "which enjoy.py plays and train.py trains on.",
            (Key("source", None, "the Sample Factory experiment folder (or the first argument)"),
             Key("experiment", None, "the run folder's name in train_dir (default: the folder's name)"), TRAIN_DIR,
             Key("checkpoint", "last", "last: its newest checkpoint_*.pth; best: its newest best_*.pth"),
             Key("policy", "0", "which of its policies (its checkpoint_p<policy>/ folder)"),
             Key("overwrite", "false", "replace an existing run folder of that name")),
            ("sf-import-run train_dir_sf/doom_basic experiment=doom_basic",
             "sf-import-run sf_runs/cartpole experiment=cp checkpoint=best overwrite=true"),
            first="source"),
)}
HELP_FLAGS = ("--help", "-h")


def wants_help(argv) -> bool:
    return any(a in HELP_FLAGS for a in argv)


def reference() -> str:
    """docs/reference/commands.md."""
    out = ["# Commands reference", "",
           "Generated by `python -m sf_hydra.app.commands > docs/reference/commands.md` from the table the commands "
           "read their keys from (`sf_hydra/app/commands.py`); `<command> --help` prints the same. `sf-train` and "
           "`sf-enjoy` are `train.py` and `enjoy.py` (their keys: the [config reference](config.md), or "
           "`python train.py --help`); `sf-report --help` lists its own options.", ""]
    for c in COMMANDS.values():
        out += [f"## {c.prog}", "", c.what, "", "| key | default | meaning |", "|---|---|---|"]
        out += [f"| `{k.name}` | {'`' + k.default + '`' if k.default is not None else ''} | {k.meaning} |"
                for k in c.keys]
        out += ["", "Examples (the guides run them in order, with the run they need):", "", "```text", *c.examples,
                "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(reference())
