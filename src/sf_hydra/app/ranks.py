"""The learner ranks of a data-parallel run (hardware.devices x hardware.num_nodes > 1) and how they start.

Who starts them. Lightning's own launcher for `devices > 1` runs the command line again for every rank >
0; for a Hydra app that means composing the config again, locking and preparing the run folder again and
checking it again in every rank. We start the ranks ourselves instead and let Lightning only join them
(its cluster environment reads the ranks from variables, it creates no process):

- locally (`python train.py hardware.devices=2`), the Hydra process is rank 0: it owns the run folder
  (lock, config, logs, checkpoints, summary), writes the composed config, resolved, as YAML to
  `<run_dir>/ranks/config.yaml` and starts ranks 1.. as `python -m sf_hydra.app.ddp_rank <that file>`, each
  logging to `<run_dir>/ranks/rank_<r>.log` (Lightning's LightningEnvironment: MASTER_ADDR, MASTER_PORT,
  WORLD_SIZE, NODE_RANK, LOCAL_RANK);
- in a Slurm job whose step runs one task per rank (`hydra/launcher=slurm` with
  `hydra.launcher.tasks_per_node=<devices>` and `hydra.launcher.nodes=<num_nodes>`), submitit runs the
  Hydra task in every task and Lightning's SLURMEnvironment reads the ranks from SLURM_PROCID and
  SLURM_LOCALID; the task of rank 0 owns the run folder;
- without Slurm, on several machines, by torchrun's convention (`env_rendezvous`): the same command on every
  machine with MASTER_ADDR, MASTER_PORT and NODE_RANK set; node n's process is global rank n x devices and
  starts its node's ranks as the local case does, with the rendezvous of the environment; global rank 0 (node
  0) owns the run folder, which every node must see (a shared filesystem, as on clusters).

Rank 0 alone decides how the run starts (it prepares the folder for `restart_behavior`, sees whether the run
is finished, picks the checkpoint to resume) and writes that decision to `<run_dir>/ranks/start.json`; every
other rank waits for the decision of this very start (`session_of`) and acts on it, never on what it reads in
the folder itself: Slurm starts all tasks at once, and a rank > 0 reading the folder before rank 0 prepared it
would resume an old checkpoint while rank 0 starts anew. On several machines without Slurm the token naming this
start travels through the TCP store at MASTER_ADDR:MASTER_PORT (app/node_store.py), which lives as long as this
start's rank 0 (a process id names no start across hosts); the decision itself, with the fingerprint of rank 0's
config (config_fingerprint: each machine composes its own config, and a rank refuses one that differs), is read
from the run folder, never from the network.

This module imports no torch and no Lightning (the command line's side).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from sf_hydra.config import ConfigError
from sf_hydra.core.faults import RankFailed
from sf_hydra.core.files import write_atomically

RANKS_DIR = "ranks"  # inside the run folder: the ranks' config and the logs of ranks > 0
RANK_CONFIG = "config.yaml"  # in RANKS_DIR: the config the local ranks > 0 run (node n > 0: config_node_<n>.yaml)
RECORD = "rank_{rank}.json"  # in RANKS_DIR: a rank's record (rank, node, pid, boot, started, log, how it ended)
START = "start.json"  # in RANKS_DIR: rank 0's decision of how this start of the ranks begins (StartDecision)


@dataclass(frozen=True)
class Ranks:
    """Where this process stands in the run. Invariant: 0 <= rank < world_size, 0 <= local_rank <= rank."""

    world_size: int
    rank: int  # global rank; rank 0 owns the run folder
    local_rank: int  # rank on this node: it picks the CUDA device and the cores of this rank's workers
    via_slurm: bool  # the ranks are Slurm tasks (else rank 0 starts the others: start_local_ranks)
    via_env: bool = False  # several machines by torchrun's convention: each node's first process starts its ranks
    node_rank: int = 0  # the node this rank runs on (0 .. hardware.num_nodes - 1)
    session: str = ""  # via_env: the token of this start, rank 0's (session_of); set once it is known

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_zero(self) -> bool:
        return self.rank == 0

    @property
    def starts_node(self) -> bool:
        """Whether this process starts the other ranks of its node (the command line's process, local rank 0)."""
        return self.local_rank == 0 and not self.via_slurm


def slurm_tasks() -> Optional[int]:
    """The tasks of the Slurm job step this process is one of (None outside a job step of several tasks)."""
    if "SLURM_PROCID" not in os.environ or "SLURM_NTASKS" not in os.environ:
        return None
    tasks = int(os.environ["SLURM_NTASKS"])
    return tasks if tasks > 1 else None


def ranks_of(devices: int, num_nodes: int) -> Ranks:
    """This process's place among `devices` x `num_nodes` ranks: from Slurm's task variables in a job step
    of several tasks (which must be that many: ConfigError otherwise); on several nodes without Slurm from
    torchrun's convention (env_rendezvous: MASTER_ADDR, MASTER_PORT, NODE_RANK; ConfigError when they are
    missing or inconsistent); else from LOCAL_RANK (unset: rank 0, which starts the others)."""
    refuse_torchrun_workers()
    world = devices * num_nodes
    if world == 1:
        return Ranks(1, 0, 0, False)
    tasks = slurm_tasks()
    if tasks is not None:
        if tasks != world:
            raise ConfigError("hardware.devices", devices,
                              f"hardware.devices x hardware.num_nodes = the Slurm job's tasks ({tasks}): set "
                              "hydra.launcher.tasks_per_node=<hardware.devices> and "
                              "hydra.launcher.nodes=<hardware.num_nodes>")
        return Ranks(world, int(os.environ["SLURM_PROCID"]), int(os.environ.get("SLURM_LOCALID", 0)), True)
    local = _int_variable("LOCAL_RANK", os.environ.get("LOCAL_RANK", "0"), devices)
    if num_nodes > 1:
        rendezvous = env_rendezvous(devices, num_nodes)
        return Ranks(world, rendezvous.node_rank * devices + local, local, False, via_env=True,
                     node_rank=rendezvous.node_rank)
    return Ranks(world, local, local, False)


@dataclass(frozen=True)
class Rendezvous:
    """Where the ranks of a run on several machines meet (torchrun's convention): rank 0's TCP store at
    address:port, and which node this machine is."""

    address: str
    port: int
    node_rank: int


TORCHRUN_ONLY = ("TORCHELASTIC_RUN_ID", "GROUP_RANK", "LOCAL_WORLD_SIZE")  # set by torchrun in its workers alone


def refuse_torchrun_workers() -> None:
    """ConfigError in a process torchrun started, on one machine or several, before any run folder is locked:
    torchrun starts one process per rank, each of which would take the run folder (sibling workers racing for its
    lock), while here one process per machine starts that machine's ranks itself."""
    spawned = [name for name in TORCHRUN_ONLY if name in os.environ]
    if spawned:
        raise ConfigError(spawned[0], os.environ[spawned[0]], (
            "unset: this process was started by torchrun (or another launcher of one process per rank), which "
            "sf_hydra does not take yet; on one machine run `python train.py hardware.devices=D ...` (it starts "
            "its D ranks itself); on several, the same command once per machine with hardware.num_nodes=N and "
            "MASTER_ADDR, MASTER_PORT, NODE_RANK set, or hydra/launcher=slurm (docs/guides/several-hosts.md)"))


def env_rendezvous(devices: int, num_nodes: int) -> Rendezvous:
    """The rendezvous of a run on `num_nodes` machines without Slurm, from MASTER_ADDR, MASTER_PORT and NODE_RANK
    (the same command runs once on every machine, with its own NODE_RANK). ConfigError, naming the variable and
    its value, when one is missing or out of range, when WORLD_SIZE is set and is not devices x num_nodes, and in a
    process torchrun started (its workers are one per rank; here each machine's process starts its own ranks)."""
    env = os.environ
    refuse_torchrun_workers()
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK") if not env.get(name)]
    if missing:
        raise ConfigError("hardware.num_nodes", num_nodes,
                          f"1, or several nodes started one of two ways ({', '.join(missing)} not set here): "
                          "hydra/launcher=slurm hydra.launcher.nodes=N hydra.launcher.tasks_per_node=<devices>; or "
                          "the same `python train.py hardware.num_nodes=N ...` on each machine with MASTER_ADDR "
                          "(node 0's address), MASTER_PORT (a free port there) and NODE_RANK (0 .. N-1) set")
    port = _int_variable("MASTER_PORT", env["MASTER_PORT"], 65536, low=1)
    node = _int_variable("NODE_RANK", env["NODE_RANK"], num_nodes)
    world = devices * num_nodes
    if env.get("WORLD_SIZE") and env["WORLD_SIZE"] != str(world):
        raise ConfigError("WORLD_SIZE", env["WORLD_SIZE"],
                          f"unset or hardware.devices x hardware.num_nodes = {devices} x {num_nodes} = {world}")
    return Rendezvous(env["MASTER_ADDR"], port, node)


def _int_variable(name: str, value: str, end: int, low: int = 0) -> int:
    """Environment variable `name`'s `value` as an integer in [low, end) (ConfigError naming it otherwise)."""
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not low <= number < end:
        raise ConfigError(name, value, f"an integer from {low} to {end - 1}")
    return number


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LocalRanks:
    """Ranks 1.. of a local data-parallel run, started by rank 0 (this process)."""

    processes: List[subprocess.Popen]
    logs: List[Path]
    saved_env: Dict[str, Optional[str]]  # this process's rendezvous variables before the ranks started
    hung: Dict[int, str] = field(default_factory=dict)  # rank -> its process state when stop() had to end it
    first: int = 1  # the global rank of processes[0]
    node: str = ""  # on several machines: this one's name, for the messages

    def failed(self) -> Optional[str]:
        """A message naming the first rank that exited with an error (its exit code and log), or None."""
        for r, (p, log) in enumerate(zip(self.processes, self.logs), start=self.first):
            code = p.poll()
            who = f"learner rank {r}" + (f" on node {self.node}" if self.node else "")
            if r in self.hung:
                what = "was stopped (SIGSTOP or a debugger)" if self.hung[r] in ("T", "t") else "hung"
                return (f"{who} {what}: it answered no collective within hardware.ddp_timeout_sec and did "
                        f"not end with the run, so it was killed (its log: {log})")
            if code not in (None, 0):
                how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
                cause = last_error(log)
                return f"{who} {how}{': ' + cause if cause else ''} (its log: {log})"
        return None

    def stop(self, grace_sec: float) -> Optional[str]:
        """Waits up to `grace_sec` for every rank to end (they stop with rank 0), then terminates (a stopped one:
        kills), then kills what is left: no rank outlives this call. Returns failed()'s message, which names a
        rank that had to be ended as hung."""
        deadline = time.monotonic() + grace_sec
        for r, p in enumerate(self.processes, start=self.first):
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.hung[r] = _process_state(p.pid) or "?"
                p.kill() if self.hung[r] in ("T", "t") else p.terminate()  # a stopped process acts on no SIGTERM
        for p in self.processes:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for name, value in self.saved_env.items():  # a later run in this process starts from them again
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        return self.failed()


def _write_private(path: Path, text: str) -> None:
    """`text` into `path`, readable by the user alone: a resolved config holds the values it took from the
    environment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w") as out:
        os.fchmod(fd, 0o600)  # a file an earlier run left keeps its mode otherwise
        out.write(text)


def log_to_rank_file(run_dir: Path, rank: int) -> None:
    """Rank `rank` (> 0) of a Slurm job, whose Hydra task logs into the run's train.log like rank 0's: its
    file handlers that write inside `run_dir` write to <run_dir>/ranks/rank_<rank>.log instead."""
    import logging

    folder = run_dir / RANKS_DIR
    for handler in list(logging.getLogger().handlers):
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).is_relative_to(run_dir):
            folder.mkdir(parents=True, exist_ok=True)
            mine = logging.FileHandler(folder / f"rank_{rank}.log")
            mine.setFormatter(handler.formatter)
            mine.setLevel(handler.level)
            logging.getLogger().removeHandler(handler)
            handler.close()
            logging.getLogger().addHandler(mine)


def last_error(log: Path) -> Optional[str]:
    """The last ERROR record of a rank's log, without its time stamp: its first line, and the last line of a
    traceback below it (the exception) when it has one. None: there is none."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    starts = [i for i, line in enumerate(lines) if "[ERROR]" in line]
    if not starts:
        return None
    first = starts[-1]
    head = lines[first].split("[ERROR]", 1)[1].strip()
    rest = []
    for line in lines[first + 1:]:
        if line.startswith("["):  # the next record
            break
        rest.append(line)
    tail = next((line.strip() for line in reversed(rest) if line.strip()), "")
    return f"{head} {tail}" if tail and not tail.startswith("^") else head


def start_local_ranks(ranks: Ranks, devices: int, run_dir: Path, config_yaml: str) -> LocalRanks:
    """This process, local rank 0 of its node, starts the node's other `devices` - 1 ranks, each
    `python -m sf_hydra.app.ddp_rank` reading the run's composed config (`config_yaml`, resolved: YAML, never a
    pickle) from <run_dir>/ranks/ and logging to ranks/rank_<its global rank>.log; sets this process's rendezvous
    variables (Lightning's LightningEnvironment reads them in every rank): on one machine a free port of 127.0.0.1,
    on several (via_env) the MASTER_ADDR, MASTER_PORT and NODE_RANK the command was given."""
    folder = run_dir / RANKS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / (RANK_CONFIG if ranks.node_rank == 0 else f"config_node_{ranks.node_rank}.yaml")
    _write_private(config, config_yaml)
    rendezvous = dict(WORLD_SIZE=str(ranks.world_size), LOCAL_RANK="0")
    if not ranks.via_env:
        rendezvous.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), NODE_RANK="0")
    saved = {name: os.environ.get(name) for name in rendezvous}
    os.environ.update(rendezvous)
    processes, logs = [], []
    for local in range(1, devices):
        log = folder / f"rank_{ranks.rank + local}.log"
        env = dict(os.environ, LOCAL_RANK=str(local))
        with open(log, "ab") as out:
            processes.append(subprocess.Popen([sys.executable, "-m", "sf_hydra.app.ddp_rank", str(config)], env=env,
                                              stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        logs.append(log)
    return LocalRanks(processes, logs, saved, first=ranks.rank + 1, node=node_name() if ranks.via_env else "")


def _interface_with_address(address: str) -> Optional[str]:
    """The name of this machine's network interface (Linux) that holds IPv4 `address`, or None."""
    import fcntl
    import struct

    siocgifaddr = 0x8915  # <linux/sockios.h>: an interface's IPv4 address
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                reply = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", name.encode()[:15]))
            except OSError:  # no IPv4 address on it
                continue
            if socket.inet_ntoa(reply[20:24]) == address:
                return name
    return None


def _slurm_job_nodes() -> List[str]:
    """The nodes of this Slurm job, expanded (`scontrol show hostnames`; [] when that fails)."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not nodelist:
        return []
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return out.split()


def use_interface_to_peers() -> Optional[str]:
    """For the ranks of a Slurm job on several nodes: unless GLOO_SOCKET_IFNAME is set already, sets it to the
    network interface through which this node reaches the job's other nodes, and returns a line saying which
    (None in a job on one node). Without it, gloo advertises the address this node's hostname resolves to,
    which is loopback on many clusters (an /etc/hosts line `127.0.1.1 <hostname>`): the ranks on the other
    nodes could never connect to it."""
    me = node_name()
    peers = [n for n in _slurm_job_nodes() if n != me]
    return _use_interface_to(me, f"node {peers[0]}", peers[0]) if peers else None


def use_interface_to_master() -> str:
    """For the ranks of a run on several machines by torchrun's convention: as use_interface_to_peers, with the
    interface that reaches MASTER_ADDR (node 0, where every rank meets; on node 0 itself, the interface holding
    that address)."""
    master = os.environ["MASTER_ADDR"]
    return _use_interface_to(node_name(), f"MASTER_ADDR {master}", master)


def _use_interface_to(me: str, what: str, peer: str) -> str:
    """Unless GLOO_SOCKET_IFNAME is set, sets it to the interface that the kernel routes host `peer` (a name or an
    address) through, found by the source address a UDP socket connected to it gets (connecting sends nothing);
    returns a line saying which, or why gloo is left to pick its interface itself."""
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return f"node {me}: gloo uses GLOO_SOCKET_IFNAME={os.environ['GLOO_SOCKET_IFNAME']} (set outside)"
    try:
        peer_address = socket.gethostbyname(peer)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((peer_address, 9))
            own_address = s.getsockname()[0]
    except OSError as e:
        return f"node {me}: no route to {what} ({e}); gloo picks its interface itself (set GLOO_SOCKET_IFNAME)"
    interface = _interface_with_address(own_address)
    if interface is None:
        return f"node {me}: no interface holds {own_address}; gloo picks its interface itself (set GLOO_SOCKET_IFNAME)"
    os.environ["GLOO_SOCKET_IFNAME"] = interface
    return f"node {me}: gloo over {interface} ({own_address}), the interface that reaches {what} ({peer_address})"


@dataclass(frozen=True)
class StartDecision:
    """How one start of a data-parallel run begins, as rank 0 decided it: every rank acts on it."""

    session: str  # which start of the ranks it is for (session_of): an earlier start's decision is never read
    checkpoint: Optional[str] = None  # the learner state every rank resumes from; None: a new run
    finished: Optional[str] = None  # the run already reached its budget (what rank 0 said): no rank trains
    failed: Optional[str] = None  # rank 0 could not start the run (its error): no rank trains
    config: Optional[dict] = None  # on several machines: rank 0's config_fingerprint, which every rank compares


def session_of(ranks: Ranks) -> str:
    """A name of this start of the ranks, the same in every rank and different at the next start: Slurm's
    job, step and requeue count; on several machines without Slurm the token rank 0 drew (every other rank got it
    through the TCP store of this start: app/node_store.py, and reads the decision it names in the run folder);
    locally the process id of rank 0, which starts the others."""
    if ranks.via_env:
        return ranks.session
    if ranks.via_slurm:
        env = os.environ
        return f"slurm-{env.get('SLURM_JOB_ID', '?')}.{env.get('SLURM_STEP_ID', '?')}." \
               f"{env.get('SLURM_RESTART_COUNT', '0')}"
    return f"local-{os.getpid() if ranks.is_zero else os.getppid()}"


def announce_start(run_dir: Path, decision: StartDecision) -> None:
    """Rank 0 writes its decision (atomically: a waiting rank reads all of it or nothing)."""
    folder = run_dir / RANKS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(decision.__dict__)
    write_atomically(folder / START, lambda tmp: tmp.write_text(text))


def forget_start(run_dir: Path) -> None:
    """Rank 0 of a run on several machines, before it serves its token: the previous start's decision goes, so
    that no token but this start's names a decision in the run folder (a stale token, replayed at MASTER_PORT by
    another process, would otherwise make a rank act on an old decision)."""
    (run_dir / RANKS_DIR / START).unlink(missing_ok=True)


def read_start(path: Path, session: str) -> Optional[StartDecision]:
    """The decision in `path` (ranks/start.json) when it is start `session`'s, else None (none yet, another
    start's, or unreadable)."""
    try:
        found = json.loads(path.read_text())
        return StartDecision(**found) if found.get("session") == session else None
    except (OSError, ValueError, TypeError, AttributeError):  # cut short, or not a decision
        return None


def config_fingerprint(cfg) -> dict:
    """What a rank on another machine compares its own composed config with, instead of receiving rank 0's:
    `sha256` of the resolved config's canonical JSON, and `keys`, each leaf's (dotted key, lists as one value)
    own digest, which name the key that differs. Every key counts: a run's keys are the same on every machine
    (the run folder at the same path; where a machine stands is in its variables, not in the config)."""
    from omegaconf import OmegaConf

    tree = OmegaConf.to_container(cfg, resolve=True)
    return {"sha256": _digest(tree), "keys": {key: _digest(value) for key, value in _leaves(tree, "")}}


def _digest(value) -> str:
    """sha256 of `value` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _leaves(tree: dict, prefix: str):
    """(dotted key, value) of every leaf of a nested dict (a list is one leaf)."""
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def same_config(cfg, theirs: Optional[dict], who: str) -> None:
    """ConfigError when `cfg`, composed on this machine, is not the config whose fingerprint (config_fingerprint)
    rank 0 wrote: naming the key whose digest differs (the least nested one: the key a command line sets, not the
    keys interpolated from it) with this machine's value (node 0's value stays on node 0), else the two digests of
    the whole. Every machine must run the same command (its ranks would otherwise train, seed or stop
    differently)."""
    from omegaconf import OmegaConf

    mine = config_fingerprint(cfg)
    theirs = theirs or {}
    if theirs.get("sha256") == mine["sha256"]:
        return
    same = "run the same command, with the same overrides, on every machine (only NODE_RANK differs)"
    their_keys, my_keys = theirs.get("keys") or {}, mine["keys"]
    differ = sorted((k for k in set(their_keys) | set(my_keys) if their_keys.get(k) != my_keys.get(k)),
                    key=lambda k: (k.count("."), k))
    if not differ:
        raise ConfigError("config sha256", mine["sha256"],
                          f"{theirs.get('sha256')}, node 0's ({who} runs another command): {same}")
    key = differ[0]
    mine_values = dict(_leaves(OmegaConf.to_container(cfg, resolve=True), ""))
    more = f"; {len(differ) - 1} more keys differ" if len(differ) > 1 else ""
    raise ConfigError(key, mine_values.get(key, "<unset>"),
                      f"node 0's value differs ({who} runs another command{more}): {same}")


def await_start(run_dir: Path, ranks: Ranks, timeout_sec: float) -> StartDecision:
    """Rank r > 0 waits for rank 0's decision of this start; RankFailed, naming rank 0, its log and the key,
    when none comes within `timeout_sec` (hardware.ddp_timeout_sec, how long any rank waits for another) or
    when rank 0 could not start."""
    import logging

    path, session = run_dir / RANKS_DIR / START, session_of(ranks)
    logging.getLogger("sf_hydra").info("learner rank %d waits for rank 0's start decision (%s)", ranks.rank, path)
    deadline = time.monotonic() + timeout_sec
    decision = read_start(path, session)
    while decision is None and time.monotonic() < deadline:
        time.sleep(0.2)
        decision = read_start(path, session)
    if decision is None:
        raise RankFailed(f"learner rank {ranks.rank}: learner rank 0 did not decide how the run starts within "
                         f"hardware.ddp_timeout_sec={timeout_sec:g} s (no decision for {session} in {path}): see "
                         "rank 0's log (the run folder's train.log); raise hardware.ddp_timeout_sec if its "
                         "start-up is that slow")
    if decision.failed is not None:
        raise RankFailed(f"learner rank {ranks.rank} stops: learner rank 0 could not start the run "
                         f"({decision.failed})")
    return decision


def node_name() -> str:
    """This host as Slurm names it (SLURMD_NODENAME), else its hostname."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def own_log(run_dir: Path, rank: int) -> str:
    """Where this rank's log is: its file in <run_dir>/ranks/ (log_to_rank_file), else the file its output goes to
    (Slurm's task output, submitit's `<jobid>_<task>_log.out`), else "its Slurm task's output" (or "its output" outside
    Slurm)."""
    mine = run_dir / RANKS_DIR / f"rank_{rank}.log"
    if mine.is_file():
        return str(mine)
    try:
        out = os.readlink("/proc/self/fd/1")
    except OSError:
        out = ""
    return out if out.startswith(os.sep) else ("its Slurm task's output" if "SLURM_JOB_ID" in os.environ else
                                               "its output")


def record_rank(run_dir: Path, ranks: Ranks, **fields) -> None:
    """A rank > 0 of a Slurm job or of a run on several machines (via_env) writes (and later completes with how it
    ended) its record, which rank 0 reads when a collective breaks: rank 0 cannot see the other ranks' processes,
    which may run on other nodes."""
    path = run_dir / RANKS_DIR / RECORD.format(rank=ranks.rank)
    record = dict(_read_json(path) or {}, **fields)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text(json.dumps(record)))


def record_start(run_dir: Path, ranks: Ranks) -> None:
    """The record of this rank for this start: where it runs, and which process it is (the boot of its machine and
    its start time, without which rank 0 never kills it: _is_recorded_process)."""
    record_rank(run_dir, ranks, session=session_of(ranks), rank=ranks.rank, node=node_name(), pid=os.getpid(),
                boot=_boot_id(), started=_start_time(os.getpid()), log=own_log(run_dir, ranks.rank), end=None,
                collective=False)


def _read_json(path: Path) -> Optional[dict]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _process_state(pid: int) -> Optional[str]:
    """The state letter of live process `pid` on this host (/proc/<pid>/stat: R, S, D, T stopped, ...); None
    when it is gone or only a zombie (dead, not yet reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    return None if state in ("Z", "X") else state


def _boot_id() -> Optional[str]:
    """This machine's boot (a random id the kernel draws at every boot), or None where it cannot be read."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _start_time(pid: int) -> Optional[str]:
    """When process `pid` of this machine started (/proc/<pid>/stat, field 22: clock ticks after boot), or None
    when it is gone: with the boot id, it tells the recorded process from a later one that got its pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _is_recorded_process(record: dict) -> bool:
    """Whether the process a rank's record names runs on this machine, alive, as the very process recorded: the
    hostname, the boot id and the process's start time all match (hosts may share a hostname: cloned images,
    containers; and a pid is reused). A record without them names no process here."""
    boot, started = _boot_id(), record.get("started")
    return (record["node"] == node_name() and boot is not None and record.get("boot") == boot
            and started is not None and _start_time(record["pid"]) == started
            and _process_state(record["pid"]) is not None)


def _scontrol_field(args: List[str], name: str) -> Optional[str]:
    """The value of `name` (`Name=value` or `Name = value`) in what `scontrol <args>` prints; None when scontrol
    fails, does not answer within a few seconds or prints no such field."""
    try:
        out = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for word in out.replace(" = ", "=").split():
        if word.startswith(f"{name}="):
            return word.split("=", 1)[1]
    return None


def node_silent(node: str, wait_sec: float = 3.0) -> Optional[str]:
    """Why Slurm node `node` counts as lost: its slurmd (at the node's NodeAddr and the cluster's SlurmdPort)
    accepts no connection within `wait_sec`, said with Slurm's state of the node; None when it answers, or when
    nothing can be asked (no scontrol): a rank that ended alone is never mistaken for its node's loss. A node that
    merely lost a process still runs its slurmd; one that went down, lost power or its network does not, long
    before Slurm's own SlurmdTimeout marks it DOWN."""
    address = _scontrol_field(["show", "node", node], "NodeAddr")
    if address is None:
        return None
    port = int(_scontrol_field(["show", "config"], "SlurmdPort") or 6818)
    try:
        with socket.create_connection((address, port), timeout=wait_sec):
            return None
    except OSError as e:
        why = "no answer" if isinstance(e, socket.timeout) else (e.strerror or type(e).__name__).lower()
    state = _scontrol_field(["show", "node", node], "State") or "unknown"
    return f"node {node} does not answer: its slurmd at {address}:{port}: {why} (Slurm has the node as {state})"


def _rank_end(record: dict, timeout_sec: float, slurm: bool = True) -> Tuple[str, Optional[str]]:
    """How one rank of this start ended, from its record, as far as rank 0 can know it, and the Slurm node lost with
    it (None: its node still answers, or not `slurm`: no slurmd to ask); a rank on this machine that hangs is killed,
    once its record proves it is that very process (_is_recorded_process; on another node Slurm ends it with the
    job step)."""
    where = f"learner rank {record['rank']} on node {record['node']} (pid {record['pid']})"
    lost = None
    if record.get("end"):
        how = f"failed: {record['end']}"
    elif _is_recorded_process(record):
        stopped = "it is stopped (SIGSTOP or a debugger)" if _process_state(record["pid"]) in ("T", "t") else \
            "it hangs, blocked in its env, its sampler or a collective"
        how = f"is alive but did not answer within hardware.ddp_timeout_sec={timeout_sec:g} s: {stopped}; killed"
        os.kill(record["pid"], signal.SIGKILL)
    elif slurm and record["node"] != node_name() and (silent := node_silent(record["node"])) is not None:
        how, lost = f"was lost with its node: {silent}", record["node"]
    else:
        how = ("ended without saying why (killed by a signal such as SIGKILL, out of memory, or its node went "
               f"down{': `sacct -j $SLURM_JOB_ID` shows how' if 'SLURM_JOB_ID' in os.environ else ''})")
    return f"{where} {how} (its log: {record['log']})", lost


def never_joined(run_dir: Path, ranks: Ranks) -> List[int]:
    """The ranks > 0 with no record of this start in the run folder (record_rank): on several machines, ranks that
    never started, failed before rank 0's decision reached them, or do not see this run folder."""
    records = [_read_json(run_dir / RANKS_DIR / RECORD.format(rank=r)) for r in range(1, ranks.world_size)]
    joined = {r.get("rank") for r in records if r and r.get("session") == session_of(ranks)}
    return sorted(set(range(1, ranks.world_size)) - joined)


def recorded_rank_end(run_dir: Path, ranks: Ranks, timeout_sec: float, timed_out: bool,
                      devices: int = 1) -> Tuple[str, Optional[str]]:
    """Rank 0's account of the rank (a Slurm task's, or one on another machine: record_rank) whose end broke a
    collective: the first rank whose failure was its own, else the ranks that never recorded themselves for this
    start, else the first that left no end of its own (killed, hung, lost with its node), else the first that
    ended; each named with its node, how it ended and its log. Also the Slurm node lost with that rank
    (node_silent), None when its node still answers or the ranks are not Slurm tasks. A rank failing on this node
    gets time to finish its record, unless the collective `timed_out` (then the ranks still running hang).
    `devices`: ranks per node (which node a rank that never recorded itself was to run on)."""
    deadline = time.monotonic() + (3.0 if timed_out else 30.0)
    while True:
        records = [_read_json(run_dir / RANKS_DIR / RECORD.format(rank=r)) for r in range(1, ranks.world_size)]
        records = [r for r in records if r and r.get("session") == session_of(ranks)]
        own = [r for r in records if r.get("end") and not r.get("collective")]
        silent = [r for r in records if not r.get("end")]
        running = [r for r in silent if _is_recorded_process(r)]
        if own or not running or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    missing = sorted(set(range(1, ranks.world_size)) - {r.get("rank") for r in records})
    if own or not missing:
        chosen = (own or silent or records)[0]
        return _rank_end(chosen, timeout_sec, slurm=ranks.via_slurm)
    if ranks.via_slurm:
        return (f"learner rank {missing[0]} ended before it recorded itself in {run_dir / RANKS_DIR} (see the "
                "Slurm tasks' output)"), None
    nodes = sorted({r // devices for r in missing})
    return (f"learner rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} never joined this start "
            f"({session_of(ranks)}: no record in {run_dir / RANKS_DIR}): on the machine{'s' if len(nodes) > 1 else ''} "
            f"with NODE_RANK={', '.join(map(str, nodes))} the command did not start, failed before learner rank 0's "
            "decision reached it, or does not see this run folder (train_dir must be on a filesystem every machine "
            "shares): see its output there"), None
