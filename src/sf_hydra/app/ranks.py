"""Where a process stands among the learner ranks of a run (hardware.devices x hardware.num_nodes), and what the
ranks leave for each other in the run folder; how the ranks start and meet is the topology's (app/topology/).

- `ranks_of`: this process's place, from the variables of whoever started it: Slurm's task variables (SLURM_PROCID,
  SLURM_LOCALID), torchrun's (RANK, LOCAL_RANK, GROUP_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE), the per-machine command's
  (MASTER_ADDR, MASTER_PORT, NODE_RANK: `env_rendezvous`), else LOCAL_RANK (unset: rank 0, which starts the others);
  a variable that contradicts hardware.devices or hardware.num_nodes is refused by name.
- the records: a rank > 0 of a Slurm job or on another machine writes where it runs and how it ended
  (`record_rank`), which rank 0 reads when a collective breaks (`recorded_rank_end`): it cannot see their processes.
- the config's fingerprint (`config_fingerprint`, `same_config`): each machine composes its own config, and a rank
  refuses one that differs from rank 0's, naming the key.
- gloo's network interface on several machines (`use_interface_to_peers`, `use_interface_to_master`).

This module imports no torch and no Lightning (the command line's side).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from sf_hydra.config import ConfigError
from sf_hydra.core.files import write_atomically

RANKS_DIR = "ranks"  # inside the run folder: the ranks' config and the logs of ranks > 0
RANK_CONFIG = "config.yaml"  # in RANKS_DIR: the config the local ranks > 0 run (node n > 0: config_node_<n>.yaml)
RECORD = "rank_{rank}.json"  # in RANKS_DIR: a rank's record (rank, node, pid, boot, started, log, how it ended)
START = "start.json"  # in RANKS_DIR: rank 0's decision of how this start of the ranks begins (app/topology/start.py)


@dataclass(frozen=True)
class Ranks:
    """Where this process stands in the run. Invariant: 0 <= rank < world_size, 0 <= local_rank <= rank."""

    world_size: int
    rank: int  # global rank; rank 0 owns the run folder
    local_rank: int  # rank on this node: it picks the CUDA device and the cores of this rank's workers
    via_slurm: bool  # the ranks are Slurm tasks (else rank 0 starts the others: start_local_ranks)
    via_env: bool = False  # several machines by torchrun's convention: each node's first process starts its ranks
    node_rank: int = 0  # the node this rank runs on (0 .. hardware.num_nodes - 1)
    via_torchrun: bool = False  # a worker torchrun started: one process per rank, none started by us

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_zero(self) -> bool:
        return self.rank == 0

    @property
    def starts_node(self) -> bool:
        """Whether this process starts the other ranks of its node (the command line's process, local rank 0)."""
        return self.local_rank == 0 and not (self.via_slurm or self.via_torchrun)


def slurm_tasks() -> Optional[int]:
    """The tasks of the Slurm job step this process is one of (None outside a job step of several tasks)."""
    if "SLURM_PROCID" not in os.environ or "SLURM_NTASKS" not in os.environ:
        return None
    tasks = int(os.environ["SLURM_NTASKS"])
    return tasks if tasks > 1 else None


def ranks_of(devices: int, num_nodes: int) -> Ranks:
    """This process's place among `devices` x `num_nodes` ranks: from Slurm's task variables in a job step
    of several tasks (which must be that many: ConfigError otherwise); in a torchrun worker from torchrun's
    (torchrun_worker); on several nodes without Slurm from
    torchrun's convention (env_rendezvous: MASTER_ADDR, MASTER_PORT, NODE_RANK; ConfigError when they are
    missing or inconsistent); else from LOCAL_RANK (unset: rank 0, which starts the others)."""
    world = devices * num_nodes
    if "TORCHELASTIC_RUN_ID" in os.environ:  # set by torchrun in its workers alone
        return torchrun_worker(devices, num_nodes)
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


def torchrun_worker(devices: int, num_nodes: int) -> Ranks:
    """A torchrun worker's place, from torchrun's variables: RANK, LOCAL_RANK, GROUP_RANK (its node), WORLD_SIZE
    and LOCAL_WORLD_SIZE, which must be hardware.devices x hardware.num_nodes and hardware.devices (ConfigError
    naming the key and torchrun's value otherwise, before anything is written)."""
    env = os.environ
    world = _int_variable("WORLD_SIZE", env.get("WORLD_SIZE", ""), 1 << 20, low=1)
    local_world = _int_variable("LOCAL_WORLD_SIZE", env.get("LOCAL_WORLD_SIZE", ""), world + 1, low=1)
    if local_world != devices:
        raise ConfigError("hardware.devices", devices, f"torchrun's workers on this machine: LOCAL_WORLD_SIZE="
                          f"{local_world} (--nproc-per-node): set hardware.devices={local_world}")
    if world != devices * num_nodes:
        raise ConfigError("hardware.num_nodes", num_nodes, f"torchrun's machines: WORLD_SIZE={world} workers = "
                          f"hardware.devices x hardware.num_nodes = {devices} x {world // devices} (--nnodes): "
                          f"set hardware.num_nodes={world // devices}")
    rank = _int_variable("RANK", env.get("RANK", ""), world)
    local = _int_variable("LOCAL_RANK", env.get("LOCAL_RANK", ""), devices)
    node = _int_variable("GROUP_RANK", env.get("GROUP_RANK", "0"), num_nodes)
    return Ranks(world, rank, local, False, node_rank=node, via_torchrun=True)


@dataclass(frozen=True)
class Rendezvous:
    """Where the ranks of a run on several machines meet (torchrun's convention): rank 0's TCP store at
    address:port, and which node this machine is."""

    address: str
    port: int
    node_rank: int

    def at(self) -> str:
        return f"MASTER_ADDR={self.address} MASTER_PORT={self.port}"


def env_rendezvous(devices: int, num_nodes: int) -> Rendezvous:
    """The rendezvous of a run on `num_nodes` machines without Slurm, from MASTER_ADDR, MASTER_PORT and NODE_RANK
    (the same command runs once on every machine, with its own NODE_RANK). ConfigError, naming the variable and
    its value, when one is missing or out of range, and when WORLD_SIZE is set and is not devices x num_nodes."""
    env = os.environ
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


def record_start(run_dir: Path, ranks: Ranks, session: str) -> None:
    """The record of this rank for start `session`: where it runs, and which process it is (the boot of its machine and
    its start time, without which rank 0 never kills it: _is_recorded_process)."""
    record_rank(run_dir, ranks, session=session, rank=ranks.rank, node=node_name(), pid=os.getpid(),
                boot=_boot_id(), started=_start_time(os.getpid()), log=own_log(run_dir, ranks.rank), end=None,
                collective=False)


def _read_json(path: Path) -> Optional[dict]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def process_state(pid: int) -> Optional[str]:
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
            and process_state(record["pid"]) is not None)


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
        stopped = "it is stopped (SIGSTOP or a debugger)" if process_state(record["pid"]) in ("T", "t") else \
            "it hangs, blocked in its env, its sampler or a collective"
        how = f"is alive but did not answer within hardware.ddp_timeout_sec={timeout_sec:g} s: {stopped}; killed"
        os.kill(record["pid"], signal.SIGKILL)
    elif slurm and record["node"] != node_name() and (silent := node_silent(record["node"])) is not None:
        how, lost = f"was lost with its node: {silent}", record["node"]
    else:
        how = ("ended without saying why (killed by a signal such as SIGKILL, out of memory, or its node went "
               f"down{': `sacct -j $SLURM_JOB_ID` shows how' if 'SLURM_JOB_ID' in os.environ else ''})")
    return f"{where} {how} (its log: {record['log']})", lost


def never_joined(run_dir: Path, ranks: Ranks, session: str) -> List[int]:
    """The ranks > 0 with no record of start `session` in the run folder (record_rank): on several machines, ranks that
    never started, failed before rank 0's decision reached them, or do not see this run folder."""
    records = [_read_json(run_dir / RANKS_DIR / RECORD.format(rank=r)) for r in range(1, ranks.world_size)]
    joined = {r.get("rank") for r in records if r and r.get("session") == session}
    return sorted(set(range(1, ranks.world_size)) - joined)


def recorded_rank_end(run_dir: Path, ranks: Ranks, session: str, timeout_sec: float, timed_out: bool,
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
        records = [r for r in records if r and r.get("session") == session]
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
            f"({session}: no record in {run_dir / RANKS_DIR}): on the machine{'s' if len(nodes) > 1 else ''} "
            f"with NODE_RANK={', '.join(map(str, nodes))} the command did not start, failed before learner rank 0's "
            "decision reached it, or does not see this run folder (train_dir must be on a filesystem every machine "
            "shares): see its output there"), None
