"""Time to a solved agent: sf_hydra against the tools a researcher would pick instead, each run as its users run it.

    python benchmarks/vs_peers.py --setup                     # every peer in its own venv (minutes)
    python benchmarks/vs_peers.py --setup sb3 torchrl         # some of them
    python benchmarks/vs_peers.py --envs CartPole-v1 --seeds 2 --cap 60
    python benchmarks/vs_peers.py --envs CartPole-v1 Acrobot-v1 --seeds 2 --write-results

Each peer lives in its own venv under the peers folder (`--peers-dir`), built by `--setup` from PyPI (torch's CPU
wheel first), and runs its own script, CLI or documented API with its own tuned config, cited in the table (`ours`:
`python train.py` with the shipped defaults). Every run is a fresh process measured from outside, launch to exit,
peers with one torch thread (OMP_NUM_THREADS=1; sf_hydra sets its own, one per process by default). Per env and
seed, the systems alternate, so a busy machine slows them alike. Two runs each:

- the solve run: stop once the last 100 training episodes average the env's target (CartPole-v1 450, Acrobot-v1
  -100), within the system's own step budget (its config's) and `--cap` seconds. Systems that stop themselves
  there (sf_hydra's `train_until_avg_return`; SB3 through RL Zoo with an SB3 callback that reads the model's own
  100-episode buffer; the TorchRL driver) are timed launch to exit. Sample Factory and CleanRL have no such stop:
  the time is launch to the output line that first shows the target (Sample Factory's 100-episode average, reported
  every 5 s; CleanRL's printed episodes, averaged here), and the run is then ended (its exit not counted).
- the fixed-budget run: `--budget` env steps, no stop at a target; steps/s = budget / launch-to-exit seconds
  (start-up and exit included).

Printed: per env and system the config cited, median time to solve and env steps to solve (over the seeds that
solved, with their range), median steps/s, solved runs / runs, and what stopped a run or why a peer could not run.
`--write-results` puts that table, with the machine (CPU model, cores, load) and date, between the markers of
docs/results.md.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    REPO,
    _children_cpu_seconds,
    _machine_busy_seconds,
    exit_cleanly_on_signals,
    fmt,
    kill_tree,
    median,
    peer_dir,
    print_table,
    python_env,
    read_summary,
    tree_processes,
)
from vs_peers_drivers import WINDOW  # noqa: E402

TORCH_VERSION = "2.13.0"  # installed first in every venv: pip then takes the CPU wheel, not a CUDA build
DRIVERS = Path(__file__).resolve().parent / "vs_peers_drivers.py"
RESULTS = REPO / "docs" / "results.md"
BEGIN, END = "<!-- vs_peers: begin -->", "<!-- vs_peers: end -->"
SOLVED = re.compile(r"vs_peers: solved at (\d+) env steps")


class CannotRun(Exception):
    """A system cannot run an env here; the message says why (it goes into the table)."""


@dataclass(frozen=True)
class Env:
    """One row group of the table: a gymnasium id, its target and our config for it (None: not run, and why)."""

    env_id: str
    target: Optional[float]
    ours: Tuple[str, ...] = ()
    not_run: str = ""


ENVS: Dict[str, Env] = {e.env_id: e for e in [
    Env("CartPole-v1", 450.0, ()),  # `python train.py`: CartPole is the default env
    Env("Acrobot-v1", -100.0, ("env=gym/acrobot",)),
    Env("HalfCheetah-v5", None, not_run="not run this round (a fixed budget, returns and time: issue 55)"),
    Env("ALE/Pong-v5", None, not_run="not run this round (frames to a return of 0: issue 55)"),
    Env("doom_basic", None, not_run="not run this round (against Sample Factory: vs_sample_factory.py)"),
]}
RUNNABLE = [e for e, spec in ENVS.items() if not spec.not_run]


# ----------------------------------------------------------------------------- one run, watched from outside


@dataclass
class Watched:
    """What one process did: its output lines with their arrival times, how it ended, the machine's load."""

    lines: List[Tuple[float, str]]
    start: float
    end: float
    returncode: Optional[int]  # None: we ended it (at the target, or at the cap)
    stopped_at: Optional[float] = None  # arrival time of the line that showed the target, when we ended it there
    other_cpu: float = 0.0  # cores kept busy by other processes meanwhile

    @property
    def wall(self) -> float:
        return self.end - self.start


def _pump(stream, lines: List[Tuple[float, str]], log) -> None:
    """Read the child's output as it comes, stamping each line with its arrival time."""
    for line in iter(stream.readline, ""):
        lines.append((time.time(), line.rstrip("\n")))
        log.write(line)
        log.flush()


def watch(cmd: Sequence[str], cwd: Path, env: dict, log_path: Path, cap: float,
          stop_when: Optional[Callable[[str], bool]] = None) -> Watched:
    """Run cmd in its own session, its output into log_path; end its tree at `cap` seconds, or as soon as a line
    satisfies stop_when (the target, for systems without a stop of their own)."""
    busy, children = _machine_busy_seconds(), _children_cpu_seconds()
    lines: List[Tuple[float, str]] = []
    with open(log_path, "w") as log:
        start = time.time()
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", start_new_session=True)
        reader = threading.Thread(target=_pump, args=(proc.stdout, lines, log), daemon=True)
        reader.start()
        stopped_at, seen, checked, scanned = None, {}, 0, 0.0
        try:
            while proc.poll() is None and time.time() - start < cap and stopped_at is None:
                if time.time() - scanned >= 1.0:  # a scan of the process table costs a few ms of CPU
                    seen.update(tree_processes(proc.pid))
                    scanned = time.time()
                try:
                    proc.wait(timeout=0.2)  # back at once when it exits: its end is not rounded up
                except subprocess.TimeoutExpired:
                    pass
                for stamp, line in lines[checked:len(lines)]:
                    checked += 1
                    if stop_when is not None and stop_when(line):
                        stopped_at = stamp
                        break
        finally:
            returncode = proc.poll()
            end = time.time()
            kill_tree(proc.pid, seen)
            proc.wait()
            reader.join(timeout=5)
    other = _machine_busy_seconds() - busy - (_children_cpu_seconds() - children)
    return Watched(lines, start, end, returncode, stopped_at, max(0.0, other / max(end - start, 1e-9)))


def failure(w: Watched) -> str:
    """One line saying why a run failed: its last error-looking line, else its last line."""
    text = [line.strip() for _, line in w.lines if line.strip()]
    errors = [line for line in text if re.search(r"(Error|Exception|error:)", line)]
    last = (errors or text or ["no output"])[-1]
    return f"exit {w.returncode}: {last[:160]}"


# ----------------------------------------------------------------------------- the systems


@dataclass
class RunSpec:
    """One launch: the command, its working folder and environment, and how its end is read."""

    cmd: List[str]
    cwd: Path
    env: dict
    stop_when: Optional[Callable[[str], bool]] = None  # we end the run at the target (no stop of its own)
    solved_steps: Optional[Callable[[Watched], Optional[int]]] = None


def peer_env(venv: Path, extra_path: Optional[Path] = None) -> dict:
    """The environment a peer runs in: its venv first on PATH, one torch thread, unbuffered output (lines arrive
    when printed, so they can be timed), no GPU, nothing of sf_hydra's PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="")
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    return env


def pip_install(venv: Path, *requirements: str, env: Optional[dict] = None, flags: Sequence[str] = ()) -> None:
    """Create the venv if needed, then pip install into it (torch's CPU wheel first, see TORCH_VERSION)."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", *flags, *requirements], check=True, env=env)


def solved_line_steps(w: Watched) -> Optional[int]:
    """Env steps from the drivers' `vs_peers: solved at N env steps` line (vs_peers_drivers.solved_line)."""
    found = [int(m.group(1)) for _, line in w.lines for m in [SOLVED.search(line)] if m]
    return found[0] if found else None


class System:
    """A compared system: where it lives, how it is installed, its config per env, the command of each run."""

    name = ""
    label = ""
    venv_name = ""
    distributions: Tuple[str, ...] = ()  # whose versions the table names

    def __init__(self, peers_dir: Path):
        self.venv = peers_dir / self.venv_name if self.venv_name else None

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python") if self.venv else sys.executable

    def installed(self) -> bool:
        return self.venv is None or (self.venv / "bin" / "python").exists()

    def setup(self) -> None:
        """Install the system into its venv."""

    def config(self, env: Env) -> str:
        """The config it runs `env` with, cited (file and entry); raises CannotRun with the reason."""
        raise NotImplementedError

    def run_spec(self, env: Env, seed: int, work: Path, budget: Optional[int]) -> RunSpec:
        """The solve run (budget None: stop at env.target) or the fixed-budget run (budget env steps)."""
        raise NotImplementedError

    def versions(self) -> str:
        """`name version` of its distributions as installed in its venv."""
        if not self.distributions or not self.installed():
            return ""
        code = ("from importlib.metadata import version\nfor d in %r:\n    try: print(d, version(d))\n"
                "    except Exception: print(d, '?')" % (self.distributions,))
        out = subprocess.run([self.python, "-c", code], capture_output=True, text=True, timeout=120)
        return ", ".join(out.stdout.split("\n")[:-1]) if out.returncode == 0 else ""


class Ours(System):
    name, label = "ours", "sf_hydra"
    distributions = ("torch", "gymnasium")

    def config(self, env: Env) -> str:
        shipped = {"CartPole-v1": "conf/env/gym/cartpole.yaml", "Acrobot-v1": "conf/env/gym/acrobot.yaml"}
        command = " ".join(["python train.py", *env.ours])
        return (f"shipped defaults (`{command}`, {shipped[env.env_id]}), solve run: "
                f"train_until_avg_return={env.target:g}")

    def run_spec(self, env, seed, work, budget):
        stop = ([f"train_until_avg_return={env.target:g}"] if budget is None
                else [f"train_for_env_steps={budget}", "train_until_avg_return=null"])
        cmd = [sys.executable, str(REPO / "train.py"), *env.ours, f"seed={seed}", f"train_dir={work}",
               "experiment=run", *stop]
        return RunSpec(cmd, work, python_env(), solved_steps=lambda w: self._solved(work / "run"))

    @staticmethod
    def _solved(run_dir: Path) -> Optional[int]:
        """Env steps at the stop, when summary.json says train_until_avg_return stopped the run."""
        summary = read_summary(run_dir)
        return summary.get("env_steps") if str(summary.get("stop_reason", "")).startswith(
            "train_until_avg_return") else None


ZOO_VERSION = "2.9.2"


def zoo_entry(venv: Path, env_id: str) -> dict:
    """RL Zoo's tuned PPO entry for env_id, read from the rl_zoo3 package installed in `venv`."""
    import yaml

    files = glob.glob(str(venv / "lib" / "python*" / "site-packages" / "rl_zoo3" / "hyperparams" / "ppo.yml"))
    if not files:
        raise CannotRun(f"rl_zoo3 is not installed in {venv} (run --setup)")
    entries = yaml.safe_load(Path(files[0]).read_text())
    if env_id not in entries:
        raise CannotRun(f"RL Zoo's ppo.yml has no {env_id} entry")
    return dict(entries[env_id])


def zoo_summary(entry: dict) -> str:
    """The entry's settings that shape the work, in a few words."""
    keys = ("n_envs", "n_steps", "batch_size", "n_epochs", "learning_rate", "normalize", "n_timesteps")
    return ", ".join(f"{k} {entry[k]}" for k in keys if k in entry)


class Sb3Zoo(System):
    name, label, venv_name = "sb3", "Stable-Baselines3 PPO (RL Zoo)", "sb3_venv"
    distributions = ("stable-baselines3", "rl_zoo3", "torch", "gymnasium")

    def setup(self):
        pip_install(self.venv, f"torch=={TORCH_VERSION}")
        pip_install(self.venv, f"stable-baselines3=={ZOO_VERSION}", f"rl-zoo3=={ZOO_VERSION}")

    def config(self, env):
        entry = zoo_summary(zoo_entry(self.venv, env.env_id))
        return f"RL Zoo's tuned entry, rl_zoo3/hyperparams/ppo.yml `{env.env_id}` ({entry})"

    def run_spec(self, env, seed, work, budget):
        """`python -m rl_zoo3.train` as its README runs it, without its periodic evaluation and checkpoints (none
        of the others evaluate); the solve run adds a callback through the zoo's `callback` hyperparameter."""
        cmd = [self.python, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", env.env_id, "--seed", str(seed),
               "--num-threads", "1", "--device", "cpu", "--eval-freq", "-1", "--save-freq", "-1",
               "-f", str(work / "logs")]
        if budget is None:
            cmd += ["-params", "callback:[{'vs_peers_drivers.sb3_stop_at_average': {'target': %r}}]" % env.target]
        else:
            cmd += ["-n", str(budget)]
        return RunSpec(cmd, work, peer_env(self.venv, DRIVERS.parent), solved_steps=solved_line_steps)


class TorchRL(System):
    name, label, venv_name = "torchrl", "TorchRL PPO", "torchrl_venv"
    distributions = ("torchrl", "tensordict", "torch", "gymnasium")

    def setup(self):
        pip_install(self.venv, f"torch=={TORCH_VERSION}")
        pip_install(self.venv, "torchrl==0.14.1", "gymnasium", "pyyaml")
        # RL Zoo's hyperparameter files only: TorchRL ships no tuned config for these envs
        pip_install(self.venv, f"rl-zoo3=={ZOO_VERSION}", flags=["--no-deps"])

    def config(self, env):
        entry = zoo_entry(self.venv, env.env_id)
        if entry.get("normalize"):
            raise CannotRun(f"RL Zoo's {env.env_id} entry normalizes rewards by the running return's spread (SB3's "
                            "VecNormalize), for which TorchRL has no transform; with its observations normalized "
                            "and rewards not, it did not learn (-495 at 61k steps)")
        return (f"no tuned config of its own for {env.env_id} (its sota-implementations/ppo: MuJoCo and Atari): "
                f"PPO from its API (Collector, GAE, ClipPPOLoss) with RL Zoo's ppo.yml `{env.env_id}` "
                f"({zoo_summary(zoo_entry(self.venv, env.env_id))})")

    def run_spec(self, env, seed, work, budget):
        entry = zoo_entry(self.venv, env.env_id)
        steps = budget or int(float(entry.get("n_timesteps", 1e6)))
        cmd = [self.python, str(DRIVERS), "torchrl", "--env", env.env_id, "--seed", str(seed), "--steps", str(steps),
               "--hyperparams", json.dumps(entry)]
        if budget is None:
            cmd += ["--target", f"{env.target:g}"]
        return RunSpec(cmd, work, peer_env(self.venv), solved_steps=solved_line_steps)


def average_reaches(target: float, parse: Callable[[str], Optional[Tuple[int, float]]],
                    window: Optional[int]) -> Tuple[Callable[[str], bool], Callable[[Watched], Optional[int]]]:
    """(stop_when, solved_steps) for a system whose output we read: parse(line) gives (env steps, value) or None;
    with `window` the values are single episodes averaged over the last `window`, else already an average."""
    recent: collections.deque = collections.deque(maxlen=window or 1)
    reached: List[int] = []

    def stop_when(line: str) -> bool:
        point = parse(line)
        if point is None:
            return False
        recent.append(point[1])
        if len(recent) == recent.maxlen and sum(recent) / len(recent) >= target:
            reached.append(point[0])
            return True
        return False

    return stop_when, lambda w: reached[0] if reached else None


SF_FRAMES = re.compile(r"Total num frames: (\d+)")
SF_AVERAGE = re.compile(r"Avg episode reward: \[\(0, '([-\d.eE+naif]+)'\)\]")


def sf_parser() -> Callable[[str], Optional[Tuple[int, float]]]:
    """Sample Factory's status lines: a frames report, then (once episodes end) its 100-episode average."""
    frames = [0]

    def parse(line: str) -> Optional[Tuple[int, float]]:
        m = SF_FRAMES.search(line)
        if m:
            frames[0] = int(m.group(1))
            return None
        m = SF_AVERAGE.search(line)
        return (frames[0], float(m.group(1))) if m else None

    return parse


# Sample Factory's own CartPole line: the docstring of sf_examples/train_gym_env.py (2.1.1)
SF_EXAMPLE = ["--algo=APPO", "--use_rnn=False", "--num_envs_per_worker=20", "--policy_workers_per_policy=2",
              "--recurrence=1", "--with_vtrace=False", "--batch_size=512", "--reward_scale=0.1", "--save_every_sec=10",
              "--experiment_summaries_interval=10"]


class SampleFactory(System):
    name, label, venv_name = "sample_factory", "Sample Factory APPO", "sf_venv"
    distributions = ("sample-factory", "torch", "gymnasium")

    def setup(self):
        from vs_sample_factory import setup_venv  # the venv vs_sample_factory.py shares (Doom and MuJoCo extras)

        setup_venv(self.venv)

    def config(self, env):
        where = ("" if env.env_id == "CartPole-v1"
                 else f" with --env={env.env_id} (benchmarks/sf_gym_env.py registers it)")
        return (f"its CartPole example line (sf_examples/train_gym_env.py docstring: 2x20 envs, batch 512, "
                f"reward_scale 0.1){where}")

    def run_spec(self, env, seed, work, budget):
        entry = ["-m", "sf_examples.train_gym_env"] if env.env_id == "CartPole-v1" else [
            str(Path(__file__).resolve().parent / "sf_gym_env.py")]
        cmd = [self.python, *entry, *SF_EXAMPLE, f"--env={env.env_id}", "--device=cpu", "--with_wandb=False",
               f"--seed={seed}", f"--train_dir={work}", "--experiment=run"]
        if budget is not None:
            return RunSpec(cmd + [f"--train_for_env_steps={budget}"], work, peer_env(self.venv))
        stop_when, solved = average_reaches(env.target, sf_parser(), window=None)
        return RunSpec(cmd, work, peer_env(self.venv), stop_when=stop_when, solved_steps=solved)


CLEANRL_SOLVE_STEPS = 500_000  # sf_hydra's CartPole budget; CleanRL's default of 100k ends before 450
CLEANRL_EPISODE = re.compile(r"global_step=(\d+), episode_reward=([-\d.eE+]+)")


def cleanrl_episode(line: str) -> Optional[Tuple[int, float]]:
    m = CLEANRL_EPISODE.search(line)
    return (int(m.group(1)), float(m.group(2))) if m else None


class CleanRL(System):
    """CleanRL's PyPI sdist (0.4.8) is its scripts; its ppo.py is run from there, with the gym and SB3 of its day."""

    name, label, venv_name = "cleanrl", "CleanRL ppo.py", "cleanrl_venv"
    distributions = ("gym", "stable-baselines3", "torch")

    @property
    def script(self) -> Path:
        return self.venv / "src" / "cleanrl-0.4.8" / "cleanrl" / "ppo.py"

    def installed(self):
        return super().installed() and self.script.exists()

    def setup(self):
        pip_install(self.venv, f"torch=={TORCH_VERSION}")
        # gym 0.21 (gym.wrappers.Monitor, env.seed) builds only with the setuptools of its day
        pip_install(self.venv, "setuptools==65.5.0", "wheel==0.38.4")
        pip_install(self.venv, "gym==0.21.0", "stable-baselines3==1.5.0", "tensorboard", "numpy<1.24",
                    flags=["--no-build-isolation"])
        src = self.venv / "src"
        src.mkdir(exist_ok=True)
        subprocess.run([str(self.venv / "bin" / "python"), "-m", "pip", "download", "--no-deps", "--no-binary",
                        ":all:", "cleanrl==0.4.8", "-d", str(src)], check=True)
        shutil.unpack_archive(str(src / "cleanrl-0.4.8.tar.gz"), str(src))

    def config(self, env):
        if not self.script.exists():
            raise CannotRun("CleanRL's ppo.py is not installed (run --setup cleanrl)")
        return ("its ppo.py defaults (cleanrl 0.4.8 sdist: 4 envs x 128 steps, 4 minibatches, 4 epochs, lr 3e-4 "
                f"annealed), solve run: --total-timesteps {CLEANRL_SOLVE_STEPS} (its 100k default ends first)")

    def run_spec(self, env, seed, work, budget):
        cmd = [self.python, str(self.script), "--gym-id", env.env_id, "--seed", str(seed), "--cuda", "False"]
        if budget is not None:
            return RunSpec(cmd + ["--total-timesteps", str(budget)], work, peer_env(self.venv))
        stop_when, solved = average_reaches(env.target, cleanrl_episode, window=WINDOW)
        return RunSpec(cmd + ["--total-timesteps", str(CLEANRL_SOLVE_STEPS)], work, peer_env(self.venv),
                       stop_when=stop_when, solved_steps=solved)


class PufferLib(System):
    """PufferLib 3.0.0's sdist fetches raylib and Box2D for its C envs while it builds (no network here): it is
    built with NO_OCEAN=1 (Python envs only), which needs the one name that branch leaves undefined."""

    name, label, venv_name = "pufferlib", "PufferLib PuffeRL", "pufferlib_venv"
    distributions = ("pufferlib", "torch", "gymnasium")

    def setup(self):
        pip_install(self.venv, f"torch=={TORCH_VERSION}")
        pip_install(self.venv, "setuptools", "wheel", "Cython", "numpy<2")
        source = self._fetch_source()
        setup_py = source / "setup.py"
        text = setup_py.read_text()
        if "c_extension_paths = []\n" not in text:  # NO_OCEAN=1 leaves it undefined, and setup() reads it
            setup_py.write_text(text.replace("c_extensions = []\n", "c_extensions = []\nc_extension_paths = []\n", 1))
        env = {**os.environ, "NO_OCEAN": "1",  # no nvcc: a CPU build of its advantage kernel
               "PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                       if not (Path(p) / "nvcc").exists())}
        pip_install(self.venv, str(source), env=env, flags=["--no-build-isolation"])

    def _fetch_source(self) -> Path:
        """The unpacked sdist: pip downloads and unpacks it, fails at its metadata (setup.py), and keeps the
        folder (--no-clean) under our TMPDIR."""
        tmp = self.venv / "build_tmp"
        found = glob.glob(str(tmp / "pip-*" / "pufferlib_*" / "setup.py"))
        if not found:
            tmp.mkdir(exist_ok=True)
            subprocess.run([str(self.venv / "bin" / "python"), "-m", "pip", "download", "--no-deps", "--no-clean",
                            "--no-build-isolation", "pufferlib==3.0.0", "-d", str(tmp)],
                           env={**os.environ, "TMPDIR": str(tmp), "NO_OCEAN": "1"}, check=False)
            found = glob.glob(str(tmp / "pip-*" / "pufferlib_*" / "setup.py"))
        if not found:
            raise SystemExit("could not unpack pufferlib 3.0.0's sdist")
        return Path(found[0]).parent

    def config(self, env):
        if env.env_id != "CartPole-v1":
            raise CannotRun(f"no PufferLib config for {env.env_id} (pufferlib/config/*.ini)")
        return ("its classic_control config (pufferlib/config/classic_control.ini, `puffer train cartpole`; its env "
                "module maps cartpole to CartPole-v0, 200-step episodes)")

    def run_spec(self, env, seed, work, budget):
        cmd = [str(self.venv / "bin" / "puffer"), "train", "cartpole", "--train.device", "cpu", "--train.seed",
               str(seed)]
        if budget is not None:
            cmd += ["--train.total-timesteps", str(budget)]
        return RunSpec(cmd, work, peer_env(self.venv))


SYSTEM_CLASSES = [Ours, Sb3Zoo, TorchRL, CleanRL, SampleFactory, PufferLib]
PEERS = [cls.name for cls in SYSTEM_CLASSES if cls.venv_name]


# ----------------------------------------------------------------------------- runs and the table


@dataclass
class Result:
    """One run of one system on one env and seed."""

    env_id: str
    system: str
    seed: int
    kind: str  # "solve" or "budget"
    wall: float = 0.0
    solved_steps: Optional[int] = None
    solved_secs: Optional[float] = None
    budget: Optional[int] = None
    ok: bool = False
    how: str = ""  # what ended it, or why it failed
    other_cpu: float = 0.0

    @property
    def steps_per_second(self) -> Optional[float]:
        return self.budget / self.wall if self.kind == "budget" and self.ok else None


def run_once(system: System, env: Env, seed: int, work: Path, cap: float, budget: Optional[int]) -> Result:
    """One solve run (budget None) or fixed-budget run, in a fresh folder."""
    kind = "solve" if budget is None else "budget"
    folder = work / env.env_id.replace("/", "_") / system.name / f"{kind}_{seed}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    spec = system.run_spec(env, seed, folder, budget)
    w = watch(spec.cmd, spec.cwd, spec.env, folder / "output.log", cap, spec.stop_when)
    result = Result(env.env_id, system.name, seed, kind, wall=w.wall, budget=budget, other_cpu=w.other_cpu)
    if kind == "budget":
        result.ok = w.returncode == 0
        result.how = "exit 0" if result.ok else (f"cap {cap:.0f} s" if w.returncode is None else failure(w))
        return result
    result.solved_steps = spec.solved_steps(w) if spec.solved_steps else None
    if w.stopped_at is not None:
        result.ok, result.solved_secs, result.how = True, w.stopped_at - w.start, "ended by us at its target line"
    elif w.returncode == 0 and result.solved_steps is not None:
        result.ok, result.solved_secs, result.how = True, w.wall, "stopped itself at the target"
    elif w.returncode == 0:
        result.how = "its step budget ran out first"
    else:
        result.how = f"cap {cap:.0f} s" if w.returncode is None else failure(w)
    return result


def describe(result: Result) -> str:
    if result.kind == "budget":
        return f"{result.budget} steps in {result.wall:.1f} s ({fmt(result.steps_per_second)} steps/s), {result.how}"
    if result.ok:
        return f"solved at {fmt(result.solved_steps)} steps, {result.solved_secs:.1f} s ({result.how})"
    return f"not solved in {result.wall:.0f} s: {result.how}"


def spread(values: Sequence[Optional[float]], spec: str, scale: float = 1.0, unit: str = "") -> str:
    """`median (min-max)` of the values that exist, or `-`."""
    present = sorted(v / scale for v in values if v is not None)
    if not present:
        return "-"
    mid = format(median(present), spec) + unit
    return mid if len(present) == 1 else f"{mid} ({format(present[0], spec)}-{format(present[-1], spec)})"


def table_rows(results: List[Result], systems: Sequence[System], envs: Sequence[str],
               configs: Dict[Tuple[str, str], str]) -> List[List[str]]:
    """One row per env and system: config, time to solve, steps to solve, steps/s, solved / runs, notes."""
    rows = []
    for env_id in ENVS:
        if ENVS[env_id].not_run:
            rows.append([env_id, "all", "-", "-", "-", "-", "-", ENVS[env_id].not_run])
            continue
        if env_id not in envs:
            continue
        for system in systems:
            mine = [r for r in results if r.env_id == env_id and r.system == system.name]
            config = configs[(env_id, system.name)]
            if config.startswith("cannot run: "):
                rows.append([env_id, system.label, "-", "-", "-", "-", "-", config])
                continue
            solves = [r for r in mine if r.kind == "solve"]
            budgets = [r for r in mine if r.kind == "budget"]
            notes = sorted({r.how for r in mine if not r.ok})
            rows.append([env_id, system.label, config,
                         spread([r.solved_secs for r in solves if r.ok], ".1f", unit=" s"),
                         spread([r.solved_steps for r in solves if r.ok], ".0f", 1000, "k"),
                         spread([r.steps_per_second for r in budgets], ",.0f"),
                         f"{sum(r.ok for r in solves)} / {len(solves)}", "; ".join(notes) or "-"])
    return rows


HEADERS = ["env", "system", "config (cited)", "time to solve", "env steps to solve", "steps/s (budget run)",
           "solved / runs", "notes"]


def markdown(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> str:
    """CPU model and cores of this machine."""
    model = platform.processor() or "unknown CPU"
    try:
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        model = names[0] if names else model
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


@dataclass
class Pass:
    """One measurement pass: its settings and load, for the results page."""

    command: str
    seeds: List[int]
    budget: int
    cap: float
    load_before: Tuple[float, ...] = ()
    load_after: Tuple[float, ...] = ()
    versions: Dict[str, str] = field(default_factory=dict)


def section(p: Pass, results: List[Result], rows: List[List[str]]) -> str:
    """The results page's section: how it was measured, on what, under what load, and the table."""
    other = median(r.other_cpu for r in results)
    versions = "; ".join(f"{k}: {v}" for k, v in p.versions.items() if v)
    return "\n".join([
        BEGIN,
        f"Measured {datetime.date.today().isoformat()} on {machine()} (`{p.command}`); load average (1, 5, 15 min) "
        f"{', '.join(f'{x:.2f}' for x in p.load_before)} before and {', '.join(f'{x:.2f}' for x in p.load_after)} "
        f"after, other processes' CPU during the runs median {fmt(other, '.2f')} cores. Seeds {p.seeds}; solve runs "
        f"capped at {p.cap:.0f} s and each system's own step budget; budget runs {p.budget:,} env steps. Times: "
        "median over the seeds that solved (range), launch to exit for systems that stop themselves at the target, "
        "launch to the output line that shows it for the others (notes). Versions: " + versions + ".",
        "",
        markdown(HEADERS, rows),
        END,
    ])


def write_results(text: str, path: Path = RESULTS) -> None:
    """Replace the marked section of the results page (or add it, with its heading, at the end)."""
    page = path.read_text()
    if BEGIN in page and END in page:
        head, rest = page.split(BEGIN, 1)
        page = head + text + rest.split(END, 1)[1]
    else:
        page = page.rstrip("\n") + "\n\n## Against the peers (`vs_peers.py`) {#vs-peers}\n\n" + text + "\n"
    path.write_text(page)


# ----------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--setup", nargs="*", choices=PEERS, metavar="PEER",
                   help=f"install these peers (default: all of {', '.join(PEERS)}) into their venvs, then exit")
    p.add_argument("--peers-dir", type=Path, default=peer_dir(""),
                   help="where each peer's venv lives, one folder each (default: %(default)s)")
    p.add_argument("--systems", nargs="+", default=[cls.name for cls in SYSTEM_CLASSES],
                   choices=[cls.name for cls in SYSTEM_CLASSES], help="systems to run (default: all)")
    p.add_argument("--envs", nargs="+", default=["CartPole-v1"], choices=RUNNABLE, help="envs to run")
    p.add_argument("--seeds", type=int, default=2, help="seeds per system and env (medians over them)")
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--cap", type=float, default=300.0, help="seconds before a run is ended (solve and budget runs)")
    p.add_argument("--budget", type=int, default=100_000, help="env steps of the fixed-budget run (0: no such run)")
    p.add_argument("--work-dir", type=Path, default=None, help="keep the runs' folders and logs here")
    p.add_argument("--write-results", nargs="?", const=RESULTS, default=None, type=Path, metavar="PAGE",
                   help="replace the marked section of this page (default: docs/results.md) with the table")
    return p.parse_args(argv)


def pass_command(args) -> str:
    """The command that repeats this pass's measurements (where its files went left out)."""
    systems = [] if set(args.systems) == {cls.name for cls in SYSTEM_CLASSES} else ["--systems", *args.systems]
    return " ".join(["python benchmarks/vs_peers.py", "--envs", *args.envs, *systems, "--seeds", str(args.seeds),
                     "--first-seed", str(args.first_seed), "--cap", f"{args.cap:g}", "--budget", str(args.budget)])


def configs_of(systems: Sequence[System], envs: Sequence[str]) -> Dict[Tuple[str, str], str]:
    """{(env, system): its cited config, or `cannot run: why`}."""
    out = {}
    for env_id in envs:
        for system in systems:
            try:
                if not system.installed():
                    raise CannotRun(f"not installed (run `--setup {system.name}`)")
                out[(env_id, system.name)] = system.config(ENVS[env_id])
            except CannotRun as why:
                out[(env_id, system.name)] = f"cannot run: {why}"
    return out


def measure(systems: Sequence[System], args, work: Path, configs) -> List[Result]:
    """Seed by seed, env by env, the systems in turn (rotated each seed): a solve run, then a budget run."""
    results: List[Result] = []
    for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
        order = list(systems[i % len(systems):]) + list(systems[:i % len(systems)])
        for env_id in args.envs:
            for system in order:
                if configs[(env_id, system.name)].startswith("cannot run: "):
                    continue
                for budget in [None] + ([args.budget] if args.budget else []):
                    results.append(run_once(system, ENVS[env_id], seed, work, args.cap, budget))
                    print(f"{env_id} {system.name} seed {seed}: {describe(results[-1])}", flush=True)
    return results


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.setup is not None:
        for cls in SYSTEM_CLASSES:
            if cls.venv_name and cls.name in (args.setup or PEERS):
                print(f"--- setting up {cls.name} in {args.peers_dir / cls.venv_name}", flush=True)
                cls(args.peers_dir).setup()
        return
    exit_cleanly_on_signals()
    import tempfile

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="vs_peers_"))
    systems = [cls(args.peers_dir) for cls in SYSTEM_CLASSES if cls.name in args.systems]
    configs = configs_of(systems, args.envs)
    run = Pass(pass_command(args),
               list(range(args.first_seed, args.first_seed + args.seeds)), args.budget, args.cap,
               load_before=os.getloadavg(), versions={s.label: s.versions() for s in systems})
    print(f"runs in {work}; load average {os.getloadavg()}", flush=True)
    results = measure(systems, args, work, configs)
    run.load_after = os.getloadavg()
    rows = table_rows(results, systems, args.envs, configs)
    print()
    print_table(HEADERS, rows)
    print(f"\nload average before {run.load_before}, after {run.load_after}")
    if args.write_results:
        write_results(section(run, results, rows), args.write_results)
        print(f"wrote the table into {args.write_results}")


if __name__ == "__main__":
    main()
