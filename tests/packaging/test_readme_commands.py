"""README.md's and the documentation site's commands as a user pastes them: every bash block of README (after
"Set up") and of each page of docs/ in the site's order (mkdocs.yml's nav), line by line, each file in ONE folder
of its own (a block's `mkdir x && cd x` holds until the block ends), so a line that lands on an earlier line's run
of its page (resumed, refused, or found finished) or needs an install the docs did not show fails. Run as
written, with a budget appended (`train_for_env_steps=3000`; enjoy: one short episode), in the venv the tests run
in (CI's is installed by .ci/run as README's "Set up" says). A line whose extra is missing is skipped, naming the
extra. A README (or docs/index.md) line that another page also holds is run there (their first commands are
the quick start's).

Lines that would cost too much even at a small budget are composed and checked instead of trained
(`check_command_line`: every stage before a process starts, a resume's included, in the same folder): ViZDoom
(~10 s a run), Atari and MuJoCo, Acrobot through `env=gym/any`, the custom env family (tests/examples trains
it), the serial and `num_workers=auto` CartPole lines (the seeds page's serial line and `python train.py` train
the same paths), the sweeps (several runs each), two learner ranks, the two machines' commands of a run across them
(their variables checked as well), PBT's four policies, evaluation during
training, the CSV logger and Trainer-argument lines. Composed only: the line for a 32-GPU cluster (no CUDA
here). Not run, with the reason: `wandb sync` (uploads, needs a login), the report lines (they need a sweep's or
PBT run's folder, and those lines are checked, not run), the test commands (what CI runs itself), the lines
of a project's own files (`my_pkg.MyCallback`, `hydra.searchpath=[file://conf]`), the several-hosts recipe's `ip`
lines (root, and a change to the machine's network: its two train.py lines are checked, their wrapper left out),
and the command of each error example (refused on purpose: tests/packaging/test_docs_examples.py compares its
refusal with the page's).
README's "Set up" block (pip install, pytest) is what CI itself runs. The lines of a page run in order and build on
each other: run the module whole, not one line with -k."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

from sf_hydra.app.bad_input import compose_command_line
from sf_hydra.app.checks import check_command_line
from sf_hydra.app.ranks import ranks_of
from sf_hydra.config.aliases import apply_aliases
from tests.faults.runs import env_with_repo
from tests.packaging.test_docs_examples import refused_commands

REPO = Path(__file__).resolve().parents[2]
CONF = str(REPO / "conf")
BIN = Path(sys.executable).parent
BUDGET = {  # appended to each line of its kind (a key the line sets is replaced): a short run, a short play
    "train": ("train_for_env_steps=3000", "logger.log_interval_sec=1"),
    "enjoy": ("episodes=1", "max_episode_steps=30"),
}
# A line's text -> (the module it needs, the extra that installs it)
NEEDS = {"env=doom/": ("vizdoom", "doom"), "+experiment=doom_": ("vizdoom", "doom"),
         "doom_basic_sf": ("vizdoom", "doom"), "video=true": ("pygame", "render"),
         "logger=wandb": ("wandb", "wandb"), "hydra/sweeper=optuna": ("hydra_plugins.hydra_optuna_sweeper", "optuna"),
         "format=onnx": ("onnxscript", "export"), "sf_hydra.app.hub": ("huggingface_hub", "hub"),
         "env=atari/": ("ale_py", "atari"), "+experiment=atari_": ("ale_py", "atari"),
         "env=mujoco/": ("mujoco", "mujoco"), "+experiment=mujoco_": ("mujoco", "mujoco")}
EXTRA_MODULES = {"docs": "material", "render": "pygame", "doom": "vizdoom", "dev": "pytest", "wandb": "wandb",
                 "video": "imageio_ffmpeg",
                 "export": "onnxscript", "hub": "huggingface_hub"}
# (a pattern of the line, what is done instead of training it, why): the first that matches; no match: trained
INSTEAD = [
    (r"^wandb sync", "skip", "uploads to W&B: needs a login"),
    (r"^python -m pytest", "skip", "the test suite itself: what CI runs (.ci/run)"),
    (r"benchmarks/", "bench", "a benchmark runs for minutes or hours: its --help must take the line's flags"),
    (r"my_pkg\.|hydra\.searchpath=\[file://conf\]", "skip", "a template: my_pkg and conf/ are the user's own files"),
    (r"report train_dir/multirun/", "skip", "needs a sweep's folder: the sweep lines are checked, not run"),
    (r"repo=someone/sf_", "skip", "downloads a Hub repo (no network here): tests/sample_factory/test_import_run.py "
     "pulls a Sample Factory repo from a folder"),
    (r"experiment=doom_basic_sf train_for_env_steps", "resume",
     "trains the imported run on to 1M steps (hours): checked as the resume of the run the line above imported"),
    (r"report\.population", "skip", "needs a PBT run's folder: the PBT lines are checked, not run"),
    (r"hardware=gpu", "compose", "a cluster of 4 nodes with 8 GPUs each: composed only (no CUDA here)"),
    (r"hydra/launcher=slurm", "check", "needs a Slurm cluster"),
    (r"--multirun", "check", "a sweep of several runs (~45 s for 4 CartPole runs)"),
    (r"env=doom/|\+experiment=doom_", "check", "a ViZDoom run costs ~10 s"),
    (r"env=atari/|\+experiment=atari_", "check", "an Atari run's conv net and ALE start-up: ~15 s"),
    (r"env=mujoco/|\+experiment=mujoco_", "check", "a MuJoCo run: 64 envs to start"),
    (r"env=gym/any", "check", "CartPole's lines cover training; Acrobot adds ~6 s"),
    (r"^ip ", "skip", "makes or removes a network namespace (root, a change to the machine): tests/ddp/"
                     "test_torchrun_nodes.py runs its two hosts in these namespaces"),
    (r"(^| )torchrun ", "check", "torchrun starts one worker per rank (tests/ddp/test_torchrun_one_node.py and "
                               "test_torchrun_nodes.py run it, on one host and two): the train.py command line its "
                               "workers run is checked, with the variables torchrun gives its first worker"),
    (r"NODE_RANK=", "check", "one machine's command of a run on two (tests/ddp/test_torchrun_nodes.py runs both on "
                             "two hosts): its variables are checked too"),
    (r"hardware\.devices=2", "check", "two learner ranks start twice the processes (~20 s)"),
    (r"pbt\.with_pbt=true", "check", "four policies with PBT (~10 s)"),
    (r"env=custom/catch", "check", "tests/examples trains the custom env family (~10 s)"),
    (r"hardware\.serial_mode=true experiment=cartpole_serial", "check", "the seeds block's line trains in one process"),
    (r"hardware\.num_workers=auto", "check", "auto is 2 workers on 2 cores: `python train.py`'s run"),
    (r"eval\.every_env_steps|\+logger\.extra\.csv|trainer\.enable_model_summary", "check",
     "a training run each: their keys are tested in tests/evaluation and tests/train"),
]
# Runs Sample Factory 2.1.1 made (tests/data/sample_factory/README.md): a user's `sf_train_dir` in every page's folder
SF_RUNS = REPO / "tests" / "data" / "sample_factory"
PLACEHOLDERS = {"<name>": "cartpole_2p"}  # the multi-agent page's enjoy line: the run just above it
# Pages (and their sections) that must hold bash blocks: a block the regex stops finding fails here.
SECTIONS = (("README.md", "## The first ten commands"), ("docs/quickstart.md", "## First commands"),
            ("docs/guides/package.md", ""), ("docs/guides/sweeps.md", ""), ("docs/guides/several-hosts.md", ""),
            ("docs/guides/several-hosts.md", "## Several hosts on one machine"),
            ("docs/guides/multi-agent.md", ""), ("docs/guides/pbt.md", ""), ("docs/guides/reproducible.md", ""),
            ("docs/guides/evaluation.md", ""), ("docs/guides/logging.md", ""), ("docs/guides/callbacks.md", ""),
            ("docs/guides/after-training.md", ""), ("docs/guides/doom.md", ""), ("docs/guides/atari.md", ""),
            ("docs/guides/mujoco.md", ""),
            ("docs/guides/sample-factory.md", "## Bringing a trained Sample Factory run over"))

# One user pasting README's lines in order: a later line plays the run an earlier one trained, so under
# pytest-xdist this module's tests run in one process, in order (tests/conftest.py, ORDERED_MODULES).
pytestmark = pytest.mark.slow


FRONT_DOORS = ("README.md", "docs/index.md")  # their lines are the quick start's: run there
REFUSED = refused_commands()  # {(page, line)}: the error examples' commands


def doc_files() -> list:
    """README.md, then the site's pages in mkdocs.yml's nav order (paths relative to the repository)."""
    nav = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)["nav"]

    def pages(entries):
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            yield from pages(value) if isinstance(value, list) else [f"docs/{value}"]
    return ["README.md", *pages(nav)]


def bash_lines(path: str) -> list:
    """[(section, line)] of a file's bash blocks, in order; comments dropped, `\\` lines joined; README's "Set up"
    block left out (CI runs it)."""
    text = (REPO / path).read_text()
    lines, section = [], ""
    for match in re.finditer(r"(?m)^(#+ [^\n]*)$|```bash\n(.*?)```", text, re.S):
        if match.group(1):
            section = match.group(1)
            continue
        if path == "README.md" and section.startswith("## Set up"):
            continue
        for line in match.group(2).replace("\\\n", " ").splitlines():
            line = line.split("  #", 1)[0].split(" # ", 1)[0].strip()
            if line and not line.startswith("#"):
                lines.append((section, line))
    return lines


def readme_lines() -> list:
    """[(file, section, line)] of README's and the docs pages' bash blocks, file by file, in order."""
    return [(path, section, line) for path in doc_files() for section, line in bash_lines(path)]


def on_a_page(line: str) -> str:
    """The docs page that also holds README's `line` ('' if none): the line is run there."""
    return next((path for path in doc_files() if path not in FRONT_DOORS
                 and line in {text for _, text in bash_lines(path)}), "")


def test_every_block_is_found():
    found = {(path, section) for path, section, _ in readme_lines()}
    missing = [(path, s) for path, s in SECTIONS if not any(p == path and f.startswith(s) for p, f in found)]
    assert not missing, f"pages (sections) with no bash block found: {missing}"
    assert ("docs/quickstart.md", "## First commands", "python train.py") in readme_lines()


def treatment(line: str):
    """("run", "") or what is done instead, and why."""
    return next(((how, why) for pattern, how, why in INSTEAD if re.search(pattern, line)), ("run", ""))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> dict:
    """The user's folder for the current file (the examples beside it, as in the checkout) and the block's folder."""
    return {"file": None, "base": None, "cwd": None, "section": None, "factory": tmp_path_factory}


def _start_file(folder: dict, path: str) -> None:
    """A file's lines start in a fresh folder of their own: a page is read on its own."""
    base = folder["factory"].mktemp(re.sub(r"\W", "_", path))
    (base / "examples").symlink_to(REPO / "examples")
    (base / "sf_train_dir").symlink_to(SF_RUNS)  # the Sample Factory runs the import lines bring over
    folder.update(file=path, base=base, cwd=base, section=None)


@pytest.mark.parametrize("path, section, line", readme_lines(),
                         ids=[f"{path}:{line[:80]}" for path, _, line in readme_lines()])
def test_readme_line_works_as_pasted(path, section, line, folder):
    if folder["file"] != path:
        _start_file(folder, path)
    if folder["section"] != section:  # a block starts where the user is: the folder they started in
        folder["cwd"], folder["section"] = folder["base"], section
    if path in FRONT_DOORS and on_a_page(line):
        pytest.skip(f"run on {on_a_page(line)}")
    if (path, line) in REFUSED:
        pytest.skip("an error example's command, refused on purpose: tests/packaging/test_docs_examples.py")
    for text, (module, extra) in NEEDS.items():
        if text in line and importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"the {extra} extra is not installed ({module})")
    how, why = treatment(line)
    if how == "skip":
        pytest.skip(why)
    for placeholder, value in PLACEHOLDERS.items():
        line = line.replace(placeholder, value)
    if line.startswith("pip install"):
        return _installed(line)
    if re.fullmatch(r"mkdir (\S+) && cd \1", line):
        folder["cwd"] = folder["cwd"] / line.split()[1]
        folder["cwd"].mkdir()
        return
    env, args = _split(line)
    env, args = _torchrun_worker(env, _inside_host(args))
    if how == "bench":
        return _check_benchmark(env, args)
    if how in ("check", "compose", "resume"):
        return _check(args, folder["cwd"], compose_only=how == "compose", env=env, resume=how == "resume")
    _run(env, args, folder["cwd"], line)


def _check_benchmark(env: dict, args) -> None:
    """A benchmark line, not run: its script exists; a Python script's --help answers and names every --flag the
    line gives; a shell script reads every VAR= the line sets."""
    script = next(a for a in args if a.startswith("benchmarks/"))
    assert (REPO / script).is_file(), f"no {script}"
    if script.endswith(".sh"):
        text = (REPO / script).read_text()
        assert not [var for var in env if var not in text], f"{script} does not read {list(env)}"
        return
    proc = subprocess.run([sys.executable, str(REPO / script), "--help"], cwd=REPO, env=env_with_repo(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]
    flags = [a.split("=", 1)[0] for a in args[: args.index("--") if "--" in args else len(args)] if a.startswith("--")]
    assert not [f for f in flags if f not in proc.stdout], f"{script} --help lacks {flags}: {proc.stdout[-3000:]}"


def _installed(line: str) -> None:
    """`pip install ".[a,b]"`: each extra is the package's, and installed (skipped, naming it, where not)."""
    extras = re.findall(r"\[([\w,]+)\]", line)
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in (e for group in extras for e in group.split(",")):
        assert extra in declared, f"{line}: no extra {extra} in pyproject.toml"
        if importlib.util.find_spec(EXTRA_MODULES.get(extra, extra)) is None:
            pytest.skip(f"the {extra} extra is not installed")


def _split(line: str):
    """(VAR=value environment, the command's words)."""
    words, env = shlex.split(line), {}
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def _inside_host(args) -> list:
    """The command a line runs in one host of the several-hosts recipe (`nsenter --net=... unshare --uts sh -c
    SCRIPT sh COMMAND...`): COMMAND; any other line's words as they are."""
    return args[args.index("-c") + 3:] if args[0] == "nsenter" else args


def _torchrun_worker(env: dict, args) -> tuple:
    """A `torchrun [options] train.py KEYS` line as its first worker runs it: (torchrun's variables for that worker,
    from --nnodes and --nproc-per-node; `python train.py KEYS`); any other line as it is."""
    if args[0] != "torchrun":
        return env, args
    options = dict(a[2:].replace("_", "-").split("=", 1) for a in args[:args.index("train.py")] if "=" in a)
    nodes, per_node = int(options.get("nnodes", 1)), int(options.get("nproc-per-node", 1))
    variables = {"TORCHELASTIC_RUN_ID": "readme", "WORLD_SIZE": str(nodes * per_node),
                 "LOCAL_WORLD_SIZE": str(per_node), "RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0"}
    return {**env, **variables}, ["python", *args[args.index("train.py"):]]


def _kind(args) -> str:
    """train, enjoy or other (--cfg, --help, a module)."""
    if "--cfg" in args or "--help" in args:
        return "other"
    if args[:2] in (["python", "train.py"],) or args[0] == "sf-train":
        return "train"
    if args[:2] in (["python", "enjoy.py"],) or args[0] == "sf-enjoy":
        return "enjoy"
    return "other"


def _command(args) -> list:
    """The words as this venv runs them: python -> this interpreter, train.py/enjoy.py -> the checkout's."""
    if args[0] == "python":
        rest = args[1:]
        if rest and rest[0] in ("train.py", "enjoy.py"):
            rest = [str(REPO / rest[0]), *rest[1:]]
        return [sys.executable, *rest]
    script = BIN / args[0]
    if not script.exists():
        pytest.fail(f"{args[0]} is not installed in {BIN}: README's `pip install .` puts it there")
    return [str(script), *args[1:]]


def _with_budget(args, kind: str) -> list:
    cut = BUDGET.get(kind, ())
    keys = {c.split("=", 1)[0] for c in cut}
    return [a for a in args if a.split("=", 1)[0] not in keys] + list(cut)


def _run(env: dict, args, cwd: Path, line: str) -> None:
    kind = _kind(args)
    train_dir = cwd / "train_dir"
    before = set(train_dir.glob("*/checkpoints/*.ckpt"))
    home = {f"WANDB_{d.upper()}_DIR": str(cwd / ".wandb_home" / d) for d in ("config", "cache", "data")}
    proc = subprocess.run(_command(_with_budget(args, kind)), cwd=cwd, env={**env_with_repo(), **home, **env},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, f"{line}\n{out[-4000:]}"
    if kind == "train":
        assert "(new run)" in out, f"{line}: landed on an earlier line's run\n{out[-3000:]}"
        assert set(train_dir.glob("*/checkpoints/*.ckpt")) - before, f"{line}: no new checkpoint\n{out[-3000:]}"
    if kind == "enjoy":
        experiment = next(a.split("=", 1)[1] for a in args if a.startswith("experiment="))
        assert (train_dir / experiment / "enjoy" / "eval.json").is_file(), f"{line}\n{out[-3000:]}"
    if "--help" in args:
        assert "Keys (" in out, out
    if "logger=wandb" in args:
        assert "anonymous" not in out, out[-3000:]  # wandb's warning on every run, which we no longer cause


def _check(args, cwd: Path, compose_only: bool, env: dict, resume: bool = False) -> None:
    """The line's command line through train.py's checks (or composed only), in the user's folder: a single run
    must be a new one, not land on a folder an earlier line made; a `resume` line must land on one. A line's
    rendezvous variables (`env`: MASTER_ADDR, NODE_RANK, ...) must give its process a place among the run's ranks
    (ranks_of, which train.py runs too)."""
    assert args[:2] == ["python", "train.py"] or args[0] == "sf-train", f"only train.py lines are checked: {args}"
    argv = apply_aliases(args[(1 if args[0] == "sf-train" else 2):] + [f"train_dir={cwd / 'train_dir'}"])
    here = Path.cwd()
    os.chdir(cwd)
    try:
        if compose_only:
            cfg = compose_command_line(argv, CONF)
            assert cfg is None or cfg.train_dir, argv
            return
        checked = check_command_line(argv, CONF)
    finally:
        os.chdir(here)
    if resume:
        found = checked is not None and (Path(checked.cfg.train_dir) / checked.cfg.experiment / "config.yaml").exists()
        assert found, f"{args}: resumes no run an earlier line made"
    elif checked is not None:
        run_dir = Path(checked.cfg.train_dir) / checked.cfg.experiment
        assert not (run_dir / "config.yaml").exists(), f"{args}: lands on an earlier line's run {run_dir}"
    if checked is not None and env:
        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        try:
            ranks = ranks_of(checked.cfg.hardware.devices, checked.cfg.hardware.num_nodes)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name)
                else:
                    os.environ[name] = value
        if "TORCHELASTIC_RUN_ID" in env:  # a torchrun worker: its place is torchrun's, which the keys must fit
            assert ranks.via_torchrun and ranks.world_size == int(env["WORLD_SIZE"]), (env, ranks)
        else:
            assert ranks.via_env and ranks.node_rank == int(env["NODE_RANK"]), (env, ranks)
