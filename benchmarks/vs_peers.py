"""Time to a solved agent, or the return a fixed budget reaches: sf_hydra against the tools a researcher would pick
instead, each run as its users run it.

    python benchmarks/vs_peers.py --setup                     # every peer in its own venv (minutes)
    python benchmarks/vs_peers.py --setup sb3 torchrl         # some of them
    python benchmarks/vs_peers.py --envs CartPole-v1 --seeds 2 --cap 60
    python benchmarks/vs_peers.py --envs CartPole-v1 Acrobot-v1 --seeds 2 --write-results
    python benchmarks/vs_peers.py --envs HalfCheetah-v5 --seeds 1 --cap 3600      # 1M env steps each
    python benchmarks/vs_peers.py --envs ALE/Pong-v5 doom_basic --seeds 1 --cap 3600

Each peer lives in its own venv under the peers folder (`--peers-dir`), built by `--setup` from PyPI (torch's CPU
wheel first), and runs its own script, CLI or documented API with its own tuned config, cited in the table (`ours`:
`python train.py` with the shipped defaults). Every run is a fresh process measured from outside, launch to exit,
peers with one torch thread (OMP_NUM_THREADS=1; sf_hydra sets its own, one per process by default). Per env and
seed, the systems alternate, so a busy machine slows them alike. Two runs each:

- the solve run (envs with a target): stop once the last 100 training episodes average the env's target
  (CartPole-v1 450, Acrobot-v1 -100), within the system's own step budget (its config's) and `--cap` seconds.
  Systems that stop themselves there (sf_hydra's `train_until_avg_return`; SB3 through RL Zoo with an SB3
  callback that reads the model's own 100-episode buffer; the TorchRL driver) are timed launch to exit. Sample
  Factory and CleanRL have no such stop: the time is launch to the output line that first shows the target (Sample
  Factory's 100-episode average, reported every 5 s; CleanRL's printed episodes, averaged here), and the run is
  then ended (its exit not counted).
- the fixed-budget run: `--budget` env steps (default: the env's own, `Env.budget`: 100k for CartPole and Acrobot,
  1M for HalfCheetah-v5, 1M frames for Pong, 300k frames for Doom basic), no stop at a target; launch-to-exit
  seconds, steps/s = budget / those seconds (start-up and exit included), and the average return the system last
  reported (ours: summary.json `avg_return`; RL Zoo: SB3's `ep_rew_mean`; Sample Factory: its `Avg episode
  reward`, divided by its env spec's reward scaling; CleanRL: its last 100 printed episodes; the TorchRL driver:
  its last line), each its own ~100-episode window (ours on Pong: 20 games, its config's `logger.stats_avg`).

HalfCheetah-v5, ALE/Pong-v5 and doom_basic have no target (fixed budget only): a return of 0 on Pong takes millions
of frames, hours per system and seed on a small CPU box. Atari and Doom budgets and steps are emulator frames (agent
steps x 4), as ours and Sample Factory count them; RL Zoo counts agent steps and gets budget / 4. The Pong row runs
each system's own Pong: ours conf/env/atari/pong.yaml, RL Zoo and Sample Factory PongNoFrameskip-v4 with their own
Atari wrappers (the v4 protocol: no sticky actions), not ALE/Pong-v5's. Sample Factory runs its MuJoCo, Atari and
ViZDoom examples as learning_vs_sample_factory.py does (its ENVS and sf_command: workers sized for a small box).
Where a peer cannot run an env here the row says why (`CannotRun`).

Printed: per env and system the config cited, median time to solve and env steps to solve (over the seeds that
solved, with their range), solved runs / runs, the budget run's env steps, median launch to exit, steps/s and
return reached, and what stopped a run or why a peer could not run. `--write-results` merges that table into the
marked section of docs/results.md, env by env: each env the pass ran gets its rows there under its own line of how
they were measured (date, command, machine: CPU model, cores, load; seeds, budgets, versions), replacing that env's
earlier block; the other envs keep the rows of the pass that last ran them, and envs no pass has run yet are one
"not run yet" row each.
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
    """One row group of the table: its id, its target (None: a fixed-budget comparison only, no solve run), our
    config for it, its fixed-budget run's default budget, and how its env steps are counted (None: not run, and
    why)."""

    env_id: str
    target: Optional[float]
    ours: Tuple[str, ...] = ()
    budget: int = 100_000  # env steps of the fixed-budget run unless --budget says otherwise
    frameskip: int = 1  # emulator frames per agent step: budgets and steps are frames (ours and SF count so)
    peer_id: str = ""  # the id the peers' own setups run for it, where not env_id (Atari: their NoFrameskip-v4)
    not_run: str = ""

    def agent_steps(self, frames: int) -> int:
        """A budget in frames as agent steps, for systems that count those (SB3)."""
        return frames // self.frameskip


ENVS: Dict[str, Env] = {e.env_id: e for e in [
    Env("CartPole-v1", 450.0, ()),  # `python train.py`: CartPole is the default env
    Env("Acrobot-v1", -100.0, ("env=gym/acrobot",)),
    Env("HalfCheetah-v5", None, ("env=mujoco/halfcheetah",), budget=1_000_000),
    # a return of 0 takes millions of frames (hours here per system and seed): a fixed budget instead
    Env("ALE/Pong-v5", None, ("env=atari/pong",), budget=1_000_000, frameskip=4, peer_id="PongNoFrameskip-v4"),
    Env("doom_basic", None, ("env=doom/basic",), budget=300_000, frameskip=4),
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
    final_return: Optional[Callable[[Watched], Optional[float]]] = None  # its last reported average return


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


def last_value(pattern: "re.Pattern[str]", scale: float = 1.0) -> Callable[[Watched], Optional[float]]:
    """The number of the last output line matching `pattern` (its group 1), divided by `scale`: a system's last
    printed average return."""
    def read(w: Watched) -> Optional[float]:
        found = [float(m.group(1)) for _, line in w.lines for m in [pattern.search(line)] if m]
        return found[-1] / scale if found else None

    return read


def episodes_average(parse: Callable[[str], Optional[Tuple[int, float]]],
                     window: int = WINDOW) -> Callable[[Watched], Optional[float]]:
    """The average of the last `window` episode returns among the output lines (parse: a line's (steps, return))."""
    def read(w: Watched) -> Optional[float]:
        returns = [point[1] for _, line in w.lines for point in [parse(line)] if point]
        return sum(returns[-window:]) / len(returns[-window:]) if returns else None

    return read


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

    SHIPPED = {"CartPole-v1": "conf/env/gym/cartpole.yaml", "Acrobot-v1": "conf/env/gym/acrobot.yaml",
               "HalfCheetah-v5": "conf/env/mujoco/halfcheetah.yaml",
               "ALE/Pong-v5": "conf/env/atari/pong.yaml: 42x42, the v4 NoFrameskip protocol (no sticky actions)",
               "doom_basic": "conf/env/doom/basic.yaml"}

    def config(self, env: Env) -> str:
        command = " ".join(["python train.py", *env.ours])
        stop = (f", solve run: train_until_avg_return={env.target:g}" if env.target is not None
                else "; its return: summary.json `avg_return`")
        return f"shipped defaults (`{command}`, {self.SHIPPED[env.env_id]}){stop}"

    def run_spec(self, env, seed, work, budget):
        stop = ([f"train_until_avg_return={env.target:g}"] if budget is None
                else [f"train_for_env_steps={budget}", "train_until_avg_return=null"])
        cmd = [sys.executable, str(REPO / "train.py"), *env.ours, f"seed={seed}", f"train_dir={work}",
               "experiment=run", *stop]
        return RunSpec(cmd, work, python_env(), solved_steps=lambda w: self._solved(work / "run"),
                       final_return=lambda w: read_summary(work / "run").get("avg_return"))

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


SB3_EP_REW = re.compile(r"\|\s*ep_rew_mean\s*\|\s*([-\d.eE+]+)\s*\|")  # its logger's 100-episode mean


def zoo_summary(entry: dict) -> str:
    """The entry's settings that shape the work, in a few words."""
    keys = ("n_envs", "n_steps", "batch_size", "n_epochs", "learning_rate", "normalize", "n_timesteps")
    return ", ".join(f"{k} {entry[k]}" for k in keys if k in entry)


class Sb3Zoo(System):
    name, label, venv_name = "sb3", "Stable-Baselines3 PPO (RL Zoo)", "sb3_venv"
    distributions = ("stable-baselines3", "rl_zoo3", "torch", "gymnasium")

    # ppo.yml entries taken for ids it has none of its own for: (the entry, why)
    STAND_INS = {
        "HalfCheetah-v5": ("Ant-v4", "it has no HalfCheetah-v5 entry and its HalfCheetah-v4 one is commented out "
                           "(`&mujoco-defaults`); that anchor, live as `Ant-v4`, is handed to it as HalfCheetah-v5 "
                           "through --conf-file (without it the zoo takes its `default` entry, no normalization)"),
        "PongNoFrameskip-v4": ("atari", "its `atari` entry, which rl_zoo3.train takes for every ALE id; the id its "
                               "docs train Pong on (its AtariWrapper skips 4 frames, 8 envs)"),
    }

    def setup(self):
        pip_install(self.venv, f"torch=={TORCH_VERSION}")
        pip_install(self.venv, f"stable-baselines3=={ZOO_VERSION}", f"rl-zoo3=={ZOO_VERSION}")
        # HalfCheetah-v5 (gymnasium's MuJoCo envs) and Pong (ale-py bundles the ROMs; AtariWrapper needs cv2)
        pip_install(self.venv, "mujoco", "ale-py", "opencv-python-headless")

    def entry(self, env: Env) -> Tuple[str, dict, str]:
        """(the id it runs, the ppo.yml entry it runs it with, why that entry where it is a stand-in)."""
        if env.env_id == "doom_basic":
            raise CannotRun("no ViZDoom env in SB3 or RL Zoo (ppo.yml has no Doom entry), none in its venv")
        gym_id = env.peer_id or env.env_id
        key, why = self.STAND_INS.get(gym_id, (gym_id, ""))
        return gym_id, zoo_entry(self.venv, key), why

    def config(self, env):
        gym_id, entry, why = self.entry(env)
        key = self.STAND_INS.get(gym_id, (gym_id,))[0]
        on = f" on {gym_id}" if gym_id != env.env_id else ""
        why = f"; {why}" if why else ""
        return f"RL Zoo's tuned entry, rl_zoo3/hyperparams/ppo.yml `{key}`{on} ({zoo_summary(entry)}){why}"

    def run_spec(self, env, seed, work, budget):
        """`python -m rl_zoo3.train` as its README runs it, without its periodic evaluation and checkpoints (none
        of the others evaluate); the solve run adds a callback through the zoo's `callback` hyperparameter."""
        gym_id, entry, _ = self.entry(env)
        cmd = [self.python, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", gym_id, "--seed", str(seed),
               "--num-threads", "1", "--device", "cpu", "--eval-freq", "-1", "--save-freq", "-1",
               "-f", str(work / "logs")]
        if self.STAND_INS.get(gym_id, ("atari",))[0] != "atari":  # an entry under another id: its own file
            cmd += ["--conf-file", str(zoo_file(work, gym_id, entry))]
        if budget is None:
            cmd += ["-params", "callback:[{'vs_peers_drivers.sb3_stop_at_average': {'target': %r}}]" % env.target]
        else:
            cmd += ["-n", str(env.agent_steps(budget))]  # its timesteps are agent steps

        def solved(w: Watched) -> Optional[int]:
            steps = solved_line_steps(w)
            return steps * env.frameskip if steps is not None else None

        return RunSpec(cmd, work, peer_env(self.venv, DRIVERS.parent), solved_steps=solved,
                       final_return=last_value(SB3_EP_REW))


def zoo_file(work: Path, gym_id: str, entry: dict) -> Path:
    """A hyperparameter file for `rl_zoo3.train --conf-file`: the one entry, under gym_id."""
    import yaml

    path = work / "ppo_entry.yml"
    path.write_text(yaml.safe_dump({gym_id: entry}))
    return path


class TorchRL(System):
    name, label, venv_name = "torchrl", "TorchRL PPO", "torchrl_venv"
    distributions = ("torchrl", "tensordict", "torch", "gymnasium")

    def setup(self):
        pip_install(self.venv, f"torch=={TORCH_VERSION}")
        pip_install(self.venv, "torchrl==0.14.1", "gymnasium", "pyyaml")
        # RL Zoo's hyperparameter files only: TorchRL ships no tuned config for these envs
        pip_install(self.venv, f"rl-zoo3=={ZOO_VERSION}", flags=["--no-deps"])

    # Its own PPO examples for these ship in the wheel without the Hydra configs they load (no network here to
    # fetch them), and the driver here is an MLP with discrete actions
    NO_EXAMPLE = {
        "HalfCheetah-v5": "its PPO MuJoCo example (sota-implementations/ppo/ppo_mujoco.py) ships in the torchrl "
                          "wheel without the config_mujoco.yaml it loads (nor hydra-core, which it needs, in its "
                          "venv); the driver here (vs_peers_drivers.torchrl_ppo) has discrete actions only",
        "ALE/Pong-v5": "its PPO Atari example (sota-implementations/ppo/ppo_atari.py) ships in the torchrl wheel "
                       "without the config_atari.yaml it loads (nor hydra-core, which it needs, in its venv); the "
                       "driver here has no conv net or Atari wrappers",
        "doom_basic": "no ViZDoom env or example in TorchRL, and no ViZDoom in its venv",
    }

    def config(self, env):
        if env.env_id in self.NO_EXAMPLE:
            raise CannotRun(self.NO_EXAMPLE[env.env_id])
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
        return RunSpec(cmd, work, peer_env(self.venv), solved_steps=solved_line_steps,
                       final_return=last_value(TORCHRL_AVERAGE))


TORCHRL_AVERAGE = re.compile(r"vs_peers: \d+ env steps, \d+ episodes averaging ([-\d.]+)")  # the driver's line


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


# Sample Factory's example per env, as learning_vs_sample_factory.py runs it (its ENVS key)
SF_CASES = {"HalfCheetah-v5": "mujoco/halfcheetah", "ALE/Pong-v5": "atari/pong", "doom_basic": "doom/basic"}
SF_EXAMPLES = {
    "HalfCheetah-v5": "its MuJoCo example (`sf_examples.mujoco.train_mujoco --env=mujoco_halfcheetah`: HalfCheetah-v4, "
                      "sf_examples/mujoco/mujoco_params.py defaults, sync PPO)",
    "ALE/Pong-v5": "its Atari example (`sf_examples.atari.train_atari --env=atari_pong` through "
                   "benchmarks/sf_atari_env.py: PongNoFrameskip-v4, sf_examples/atari/atari_params.py defaults)",
    "doom_basic": "its ViZDoom example (`sf_examples.vizdoom.train_vizdoom --env=doom_basic`, its Doom defaults; "
                  "returns / its 0.01 reward scaling)",
}


class SampleFactory(System):
    name, label, venv_name = "sample_factory", "Sample Factory APPO", "sf_venv"
    distributions = ("sample-factory", "torch", "gymnasium")

    def setup(self):
        from vs_sample_factory import setup_venv  # the venv vs_sample_factory.py shares (Doom and MuJoCo extras)

        setup_venv(self.venv)

    def config(self, env):
        if env.env_id in SF_CASES:
            n, k = sf_case(env).sf_workers or sf_case(env).workers
            return (f"{SF_EXAMPLES[env.env_id]} as learning_vs_sample_factory.py runs it: {n} workers x {k} envs (its "
                    "defaults assume 8+ cores); its return: the last `Avg episode reward` (100 episodes)")
        where = ("" if env.env_id == "CartPole-v1"
                 else f" with --env={env.env_id} (benchmarks/sf_gym_env.py registers it)")
        return (f"its CartPole example line (sf_examples/train_gym_env.py docstring: 2x20 envs, batch 512, "
                f"reward_scale 0.1){where}")

    def run_spec(self, env, seed, work, budget):
        if env.env_id in SF_CASES:
            return self._example_spec(env, seed, work, budget)
        entry = ["-m", "sf_examples.train_gym_env"] if env.env_id == "CartPole-v1" else [
            str(Path(__file__).resolve().parent / "sf_gym_env.py")]
        cmd = [self.python, *entry, *SF_EXAMPLE, f"--env={env.env_id}", "--device=cpu", "--with_wandb=False",
               f"--seed={seed}", f"--train_dir={work}", "--experiment=run"]
        if budget is not None:
            return RunSpec(cmd + [f"--train_for_env_steps={budget}"], work, peer_env(self.venv),
                           final_return=last_value(SF_AVERAGE))
        stop_when, solved = average_reaches(env.target, sf_parser(), window=None)
        return RunSpec(cmd, work, peer_env(self.venv), stop_when=stop_when, solved_steps=solved)

    def _example_spec(self, env, seed, work, budget):
        """learning_vs_sample_factory.py's command for the env's example (its budget in frames, as ours)."""
        from learning_vs_sample_factory import sf_command

        case = sf_case(env)
        cmd = sf_command(self.python, case, work, seed, budget or case.env_steps)
        return RunSpec(cmd, work, peer_env(self.venv), final_return=last_value(SF_AVERAGE, case.sf_reward_scaling))


def sf_case(env: Env):
    """learning_vs_sample_factory.py's EnvCase for env: Sample Factory's example, its args and workers."""
    from learning_vs_sample_factory import ENVS as CASES

    return CASES[SF_CASES[env.env_id]]


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

    # Why its 0.4.8 scripts for these cannot run here
    NOT_HERE = {
        "HalfCheetah-v5": "its ppo_continuous_action.py (0.4.8; default env PyBullet's HopperBulletEnv-v0) runs on "
                          "gym 0.21, whose HalfCheetah is v2/v3 through mujoco-py, which needs MuJoCo 2.1's binaries "
                          "from the internet (none here); no v4/v5 in gym 0.21",
        "ALE/Pong-v5": "its ppo_atari.py (0.4.8) needs gym 0.21's Atari: ale-py 0.7, whose ROMs AutoROM downloads at "
                       "install (no network here; later ale-py bundles them but needs gymnasium)",
        "doom_basic": "no ViZDoom script in CleanRL 0.4.8 and no ViZDoom in its venv",
    }

    def config(self, env):
        if env.env_id in self.NOT_HERE:
            raise CannotRun(self.NOT_HERE[env.env_id])
        if not self.script.exists():
            raise CannotRun("CleanRL's ppo.py is not installed (run --setup cleanrl)")
        return ("its ppo.py defaults (cleanrl 0.4.8 sdist: 4 envs x 128 steps, 4 minibatches, 4 epochs, lr 3e-4 "
                f"annealed), solve run: --total-timesteps {CLEANRL_SOLVE_STEPS} (its 100k default ends first)")

    def run_spec(self, env, seed, work, budget):
        cmd = [self.python, str(self.script), "--gym-id", env.env_id, "--seed", str(seed), "--cuda", "False"]
        if budget is not None:
            return RunSpec(cmd + ["--total-timesteps", str(budget)], work, peer_env(self.venv),
                           final_return=episodes_average(cleanrl_episode))
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
        # its atari and mujoco env modules: ale-py 0.9 (bundled ROMs, gymnasium 0.29), MuJoCo 2.x for gymnasium 0.29
        pip_install(self.venv, "ale-py==0.9.0", "mujoco==2.3.7")

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

    NOT_HERE = {
        "HalfCheetah-v5": "its mujoco config (pufferlib/config/mujoco.ini, HalfCheetah-v4) fails at env creation: "
                          "its mujoco env module calls gymnasium 1.x's TransformObservation(env, f, space), while "
                          "3.0.0 pins gymnasium<=0.29.1 (TypeError: takes 3 positional arguments but 4 were given)",
        "doom_basic": "its doom config (pufferlib/config/doom.ini) runs its own scenario, and its vizdoom env module "
                      "imports pufferlib.postprocess, which 3.0.0 does not ship; no ViZDoom in its venv",
    }
    PONG_ENVS = 128  # pufferlib/config/atari.ini [vec] num_envs

    def config(self, env):
        if env.env_id in self.NOT_HERE:
            raise CannotRun(self.NOT_HERE[env.env_id])
        if env.env_id == "ALE/Pong-v5":
            return ("its atari config (pufferlib/config/atari.ini, `puffer train pong`: ale-py's Pong, frameskip 1 so "
                    f"its steps are frames, {self.PONG_ENVS} envs, batch 8192, 1 epoch) with --vec.num-workers "
                    f"{puffer_workers(self.PONG_ENVS)} (its 16 are refused with fewer cores); its return: the "
                    "dashboard's last `episode_return` (episodes since its previous log); a budget run ends after "
                    "its final evaluation, which waits for an episode to end")
        if env.env_id != "CartPole-v1":
            raise CannotRun(f"no PufferLib config for {env.env_id} (pufferlib/config/*.ini)")
        return ("its classic_control config (pufferlib/config/classic_control.ini, `puffer train cartpole`; its env "
                "module maps cartpole to CartPole-v0, 200-step episodes)")

    def run_spec(self, env, seed, work, budget):
        game = "pong" if env.env_id == "ALE/Pong-v5" else "cartpole"
        cmd = [str(self.venv / "bin" / "puffer"), "train", game, "--train.device", "cpu", "--train.seed", str(seed)]
        if game == "pong":
            cmd += ["--vec.num-workers", str(puffer_workers(self.PONG_ENVS))]
        if budget is not None:
            cmd += ["--train.total-timesteps", str(budget)]
        return RunSpec(cmd, work, peer_env(self.venv), final_return=last_value(PUFFER_RETURN))


PUFFER_RETURN = re.compile(r"episode_return\s+([-\d.]+)")  # a row of its dashboard's User Stats


def puffer_workers(num_envs: int, most: int = 16) -> int:
    """PufferLib's workers here: its config's 16, or the most that this machine's cores allow (it refuses more
    workers than physical cores) and that divide its envs."""
    import psutil

    cores = min(most, psutil.cpu_count(logical=False) or 1)
    return max(n for n in range(1, cores + 1) if num_envs % n == 0)


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
    final_return: Optional[float] = None  # budget run: its last reported average return

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
        result.final_return = spec.final_return(w) if spec.final_return else None
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
        return (f"{result.budget} steps in {result.wall:.1f} s ({fmt(result.steps_per_second)} steps/s), return "
                f"{fmt(result.final_return, '.1f')}, {result.how}")
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
    """One row per env and system: config, time to solve, steps to solve, solved / runs (envs with a target), the
    budget run's steps, launch to exit, steps/s and return reached, notes."""
    rows = []
    for env_id in ENVS:
        if ENVS[env_id].not_run:
            rows.append([env_id, "all", "-", *["-"] * (len(HEADERS) - 4), ENVS[env_id].not_run])
            continue
        if env_id not in envs:
            continue
        for system in systems:
            mine = [r for r in results if r.env_id == env_id and r.system == system.name]
            config = configs[(env_id, system.name)]
            if config.startswith("cannot run: "):
                rows.append([env_id, system.label, "-", *["-"] * (len(HEADERS) - 4), config])
                continue
            solves = [r for r in mine if r.kind == "solve"]
            budgets = [r for r in mine if r.kind == "budget"]
            done = [r for r in budgets if r.ok]
            notes = sorted({r.how for r in mine if not r.ok})
            rows.append([env_id, system.label, config,
                         spread([r.solved_secs for r in solves if r.ok], ".1f", unit=" s"),
                         spread([r.solved_steps for r in solves if r.ok], ".0f", 1000, "k"),
                         f"{sum(r.ok for r in solves)} / {len(solves)}" if solves else "-",
                         spread(list({r.budget for r in budgets}), ".0f", 1000, "k"),
                         spread([r.wall for r in done], ".1f", unit=" s"),
                         spread([r.steps_per_second for r in budgets], ",.0f"),
                         spread([r.final_return for r in done], ".1f"), "; ".join(notes) or "-"])
    return rows


HEADERS = ["env", "system", "config (cited)", "time to solve", "env steps to solve", "solved / runs",
           "budget run: env steps", "launch to exit", "steps/s", "return reached", "notes"]


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
    budget: Dict[str, int]  # the budget run's env steps (Atari, Doom: frames) per env of the pass, 0: none
    cap: float
    load_before: Tuple[float, ...] = ()
    load_after: Tuple[float, ...] = ()
    versions: Dict[str, str] = field(default_factory=dict)


# The marked section holds one block per env, each the rows of the latest pass that measured that env under its
# own provenance line, then one table of the envs no pass has measured yet. A pass replaces the blocks of its envs
# and keeps the others as they were (write_results).
ENV_MARK = re.compile(r"^<!-- vs_peers env: (.+?) -->[ \t]*$", re.M)
NOT_RUN_MARK = "<!-- vs_peers: not run yet -->"


def env_mark(env_id: str) -> str:
    return f"<!-- vs_peers env: {env_id} -->"


def env_blocks(p: Pass, results: List[Result], rows: List[List[str]]) -> Dict[str, str]:
    """{env: its block for the results page}, one per env this pass measured: its marker and heading, how it was
    measured, on what, under what load, and its rows of the table."""
    versions = "; ".join(f"{k}: {v}" for k, v in p.versions.items() if v)
    blocks = {}
    for env_id in p.budget:
        other = median(r.other_cpu for r in results if r.env_id == env_id) if any(
            r.env_id == env_id for r in results) else None
        blocks[env_id] = "\n".join([
            env_mark(env_id),
            f"### {env_id}",
            "",
            f"Measured {datetime.date.today().isoformat()} on {machine()} (`{p.command}`); load average (1, 5, 15 "
            f"min) {', '.join(f'{x:.2f}' for x in p.load_before)} before and "
            f"{', '.join(f'{x:.2f}' for x in p.load_after)} after, other processes' CPU during its runs median "
            f"{fmt(other, '.2f')} cores. Seeds {p.seeds}; solve runs capped at {p.cap:.0f} s and each system's own "
            f"step budget; budget run (env steps; Atari, Doom: frames) {p.budget[env_id]:,}. Times: median over the "
            "seeds that solved (range), launch to exit for systems that stop themselves at the target, launch to "
            "the output line that shows it for the others (notes). Versions: " + versions + ".",
            "",
            markdown(HEADERS, [row for row in rows if row[0] == env_id]),
        ])
    return blocks


def parse_blocks(inner: str) -> Dict[str, str]:
    """{env: its block} from the text between the section's markers, as env_blocks wrote them (the not-run-yet
    table is left out: section() writes it anew; so are the section's own markers, where the text holds them). A
    section from before the per-env blocks (one paragraph, one table) gives each of its envs a block of that
    paragraph and its rows."""
    inner = inner.split(BEGIN, 1)[-1].split(END, 1)[0].split(NOT_RUN_MARK, 1)[0]
    found = list(ENV_MARK.finditer(inner))
    if found:
        ends = [m.start() for m in found[1:]] + [len(inner)]
        return {m.group(1): inner[m.start():end].strip("\n") for m, end in zip(found, ends)}
    lines = inner.strip("\n").splitlines()
    table = [line for line in lines if line.startswith("|")]
    if len(table) < 3:
        return {}
    provenance = "\n".join(line for line in lines if not line.startswith("|")).strip("\n")
    header, rows = table[:2], table[2:]
    blocks: Dict[str, str] = {}
    for env_id in dict.fromkeys(row.split("|")[1].strip() for row in rows):
        mine = [row for row in rows if row.split("|")[1].strip() == env_id]
        if any(row.rstrip(" |").endswith("not run this round") or "| all |" in row for row in mine):
            continue  # a placeholder row, not a measurement
        blocks[env_id] = "\n".join([env_mark(env_id), f"### {env_id}", "", provenance, "", *header, *mine])
    return blocks


def section(blocks: Dict[str, str]) -> str:
    """The results page's marked section: the envs' blocks in ENVS's order (then any other env a page still
    holds), then a table of the envs no pass has measured yet (or that cannot run at all, and why)."""
    order = [e for e in ENVS if e in blocks] + [e for e in blocks if e not in ENVS]
    missing = [[e, "all", *["-"] * (len(HEADERS) - 3), ENVS[e].not_run or "not run yet"]
               for e in ENVS if e not in blocks]
    parts = [blocks[e] for e in order]
    if missing:
        parts.append("\n".join([NOT_RUN_MARK, "### Not run yet", "", markdown(HEADERS, missing)]))
    return "\n".join([BEGIN, "\n\n".join(parts), END])


def write_results(blocks: Dict[str, str], path: Path = RESULTS) -> None:
    """Merge these envs' blocks into the marked section of the results page: theirs replace the blocks of the
    same envs, the other envs' blocks stay as they were (or add the section, with its heading, at the end)."""
    page = path.read_text()
    if BEGIN in page and END in page:
        head, rest = page.split(BEGIN, 1)
        inner, tail = rest.split(END, 1)
        page = head + section({**parse_blocks(inner), **blocks}) + tail
    else:
        page = page.rstrip("\n") + "\n\n## Against the peers (`vs_peers.py`) {#vs-peers}\n\n" + section(blocks) + "\n"
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
    p.add_argument("--budget", type=int, default=None,
                   help="env steps (Atari, Doom: frames) of the fixed-budget run (0: no such run; default: the env's, "
                        + ", ".join(f"{e} {spec.budget:,}" for e, spec in ENVS.items()) + ")")
    p.add_argument("--work-dir", type=Path, default=None, help="keep the runs' folders and logs here")
    p.add_argument("--write-results", nargs="?", const=RESULTS, default=None, type=Path, metavar="PAGE",
                   help="merge the table into the marked section of this page (default: docs/results.md): "
                        "the envs of this pass replace their rows there, the other envs' stay")
    return p.parse_args(argv)


def pass_command(args) -> str:
    """The command that repeats this pass's measurements (where its files went left out)."""
    systems = [] if set(args.systems) == {cls.name for cls in SYSTEM_CLASSES} else ["--systems", *args.systems]
    budget = [] if args.budget is None else ["--budget", str(args.budget)]
    return " ".join(["python benchmarks/vs_peers.py", "--envs", *args.envs, *systems, "--seeds", str(args.seeds),
                     "--first-seed", str(args.first_seed), "--cap", f"{args.cap:g}", *budget])


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


def budgets_of(args) -> Dict[str, int]:
    """The budget run's env steps (0: none) per env of this pass."""
    return {e: ([0] + runs_of(ENVS[e], args.budget))[-1] or 0 for e in args.envs}


def runs_of(env: Env, budget: Optional[int]) -> List[Optional[int]]:
    """The runs of a system on env: a solve run (None) where it has a target, then a budget run of `budget` env
    steps (None: the env's default; 0: none)."""
    budget = env.budget if budget is None else budget
    return ([None] if env.target is not None else []) + ([budget] if budget else [])


def measure(systems: Sequence[System], args, work: Path, configs) -> List[Result]:
    """Seed by seed, env by env, the systems in turn (rotated each seed): a solve run, then a budget run."""
    results: List[Result] = []
    for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
        order = list(systems[i % len(systems):]) + list(systems[:i % len(systems)])
        for env_id in args.envs:
            for system in order:
                if configs[(env_id, system.name)].startswith("cannot run: "):
                    continue
                for budget in runs_of(ENVS[env_id], args.budget):
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
               list(range(args.first_seed, args.first_seed + args.seeds)), budgets_of(args), args.cap,
               load_before=os.getloadavg(), versions={s.label: s.versions() for s in systems})
    print(f"runs in {work}; load average {os.getloadavg()}", flush=True)
    results = measure(systems, args, work, configs)
    run.load_after = os.getloadavg()
    rows = table_rows(results, systems, args.envs, configs)
    print()
    print_table(HEADERS, rows)
    print(f"\nload average before {run.load_before}, after {run.load_after}")
    if args.write_results:
        write_results(env_blocks(run, results, rows), args.write_results)
        print(f"merged the rows of {', '.join(args.envs)} into {args.write_results}")


if __name__ == "__main__":
    main()
