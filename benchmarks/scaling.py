"""Data-parallel scaling across the two Slurm nodes of `cluster/slurm/start.sh --two-nodes` (sfn1, sfn2: network
namespaces joined by a veth bridge), each node pinned to one core: one rank on one node against one rank per node.

    python benchmarks/scaling.py                  # CartPole and Doom basic, 3 repeats, the raw all-reduce (~15 min)
    python benchmarks/scaling.py --quick          # one repeat, short runs (~5 min)
    python benchmarks/scaling.py --envs cartpole --repeats 5 -- algo.batch_size=256
    python benchmarks/scaling.py --compare BEFORE/results.json AFTER/results.json   # a Markdown table, no runs

Every run is `python train.py --multirun hydra/launcher=slurm hydra.launcher.partition=two_nodes
hardware.num_nodes=N hardware.devices=1 hardware.num_workers=1` (the 1-node run on sfn1), with the env's own
config: the per-rank batch is the same in both layouts, so a 2-node update learns from twice the frames. Each
job's processes are pinned by host (sfn1 -> CPU 0, sfn2 -> CPU 1) through `_scaling_job/sitecustomize.py`, and
`_scaling_job/collective_probe.py` times each rank's collectives per learner step. Layouts alternate within a
repeat (a change of the shared machine's load hits both alike); medians over repeats.

Printed per env and layout: the steady FPS (TensorBoard's env steps between its first and last report), the
scaling efficiency FPS(2 nodes) / (2 x FPS(1 node)), the learner step (median over steps, the first 3 left
out), the share of the step cycle its rank spent inside collectives (waiting for the other rank included), the
bytes each rank contributed per step (by kind), and for CartPole the env steps and seconds to the config's
target (`train_until_avg_return`); then a raw gloo all-reduce between the nodes over the veth link (the two
models' gradient sizes and a size sweep, fitted as latency + bytes / bandwidth), and an ESTIMATE for 8 nodes x
8 GPUs from those costs under stated interconnect assumptions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    fmt,
    median,
    print_table,
    python_env,
    read_summary,
    read_tb_scalars,
    run_tree,
    start_benchmark,
    steady_fps,
    train_py_command,
)

PARTITION = "two_nodes"
NODES = {"sfn1": "10.87.0.2", "sfn2": "10.87.0.3"}  # cluster/slurm/netns.sh: each node's bridge address
PIN = "sfn1:0,sfn2:1"  # host -> core (_scaling_job/sitecustomize.py)
JOB_PATH = Path(__file__).resolve().parent / "_scaling_job"
PROBE = "collective_probe.CollectiveProbe"
SKIP_STEPS = 3  # learner steps left out of the medians (start-up)
ENVS = {  # name -> overrides; the budget is the env config's own unless the mode sets one
    "cartpole": ["env=gym/cartpole"],
    "doom_basic": ["env=doom/basic"],
}
SWEEP_SIZES = [1, 1024, 16384, 262144, 1048576, 4194304]  # float32 numbers per raw all-reduce


# ----------------------------------------------------------------------------- the cluster


def two_nodes_problem() -> Optional[str]:
    """Why the two-node partition cannot run the benchmark now, or None. A node still completing an earlier job
    is up (each run waits for the partition to be empty first: wait_for_free_nodes)."""
    try:
        out = subprocess.run(["sinfo", "-h", "-p", PARTITION, "-N", "-o", "%N %T"], capture_output=True, text=True,
                             timeout=30)
    except (FileNotFoundError, subprocess.TimeoutExpired) as e:
        return f"no Slurm answer ({e})"
    states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
    if {n for n, s in states.items() if s.rstrip("*~#!%$@^-") in {"idle", "mixed", "completing"}} != set(NODES):
        return (f"partition {PARTITION} is not up and idle ({states or 'none'}): start it with "
                "cluster/slurm/start.sh --two-nodes")
    return None


def wait_for_free_nodes(max_wait: float) -> None:
    """Waits (up to max_wait s) until no job runs or waits in the two-node partition: other users' jobs would
    share the pinned cores."""
    deadline = time.time() + max_wait
    while time.time() < deadline:
        queued = subprocess.run(["squeue", "-h", "-p", PARTITION, "-o", "%i"], capture_output=True, text=True,
                                timeout=30).stdout.split()
        if not queued:
            return
        print(f"  partition {PARTITION} busy (jobs {' '.join(queued)}); waiting", flush=True)
        time.sleep(10)


def job_env() -> dict:
    """The environment of a sweep: src/ and _scaling_job/ on the path (sbatch exports it to the job), the pinning."""
    env = python_env(extra_path=JOB_PATH)
    env["SF_BENCH_PIN"] = PIN
    return env


def loadavg() -> float:
    """The machine's 1-minute load average (shared: printed beside every figure)."""
    return os.getloadavg()[0]


# ----------------------------------------------------------------------------- one run


def run(env_name: str, nodes: int, repeat: int, work: Path, mode: List[str], overrides: List[str],
        timeout: float) -> dict:
    """One Slurm sweep of one run on `nodes` nodes; its FPS, target, step and collective figures."""
    tag = f"{env_name}_{nodes}n_r{repeat}"
    probe_dir = work / tag / "probe"  # collect() reads it
    name = f"sf_scaling_{uuid.uuid4().hex[:8]}"
    layout = ["hardware.num_nodes=2"] if nodes == 2 else ["hardware.num_nodes=1",
                                                          "+hydra.launcher.additional_parameters.nodelist=sfn1"]
    cmd = train_py_command(sys.executable, [
        "--multirun", "hydra/launcher=slurm", f"hydra.launcher.partition={PARTITION}", f"hydra.launcher.name={name}",
        f"train_dir={work / tag}", "sweep_name=sweep", "experiment=run", *ENVS[env_name], *layout,
        "hardware.devices=1", "hardware.num_workers=1", "logger.experiment_summaries_interval=2",
        f"+callbacks.collective_probe._target_={PROBE}", f"+callbacks.collective_probe.directory={probe_dir}",
        *mode, *overrides])
    load = loadavg()
    try:
        proc = run_tree(cmd, work / f"{tag}.log", cwd=work, env=job_env(), timeout=timeout)
    finally:
        subprocess.run(["scancel", f"--name={name}"], capture_output=True, timeout=60)
    return {**collect(work / tag), "env": env_name, "nodes": nodes, "repeat": repeat, "wall": proc.wall_seconds,
            "load": load, "other_cpu": proc.other_cpu, "log": str(work / f"{tag}.log"), "exit": proc.returncode}


def collect(folder: Path) -> dict:
    """What one run's folder holds: its steady FPS, env steps and training seconds at the target (None when it
    stopped for another reason), final return, and the probe's figures."""
    run_dirs = sorted((folder / "multirun" / "sweep").glob("*/summary.json"))
    run_dir = run_dirs[0].parent if run_dirs else None
    summary = read_summary(run_dir) if run_dir else {}
    reached = "train_until_avg_return" in str(summary.get("stop_reason"))
    probes = [json.loads(p.read_text()) for p in sorted((folder / "probe").glob("collectives_rank_*.json"))]
    return {"ok": bool(summary), "fps": steady_fps(read_tb_scalars(run_dir, "perf/env_steps")) if run_dir else None,
            "steps": summary.get("env_steps") if reached else None,
            "train_s": summary.get("train_seconds") if reached else None, "final": summary.get("avg_return"),
            **probe_figures(probes)}


def probe_figures(probes: List[dict]) -> dict:
    """Rank 0's medians over its learner steps (the first SKIP_STEPS left out): step and cycle seconds, seconds
    and bytes in collectives per step (by kind), the model's trainable numbers, and every rank's host and cores."""
    if not probes:
        return {}
    rank0 = next((p for p in probes if p["rank"] == 0), probes[0])
    steps = rank0["steps"][SKIP_STEPS:] or rank0["steps"]
    kinds = sorted({k for s in steps for k in s["collectives"]})

    def per_step(kind: str, index: int) -> float:
        return statistics.median(s["collectives"].get(kind, [0, 0, 0.0])[index] for s in steps)

    coll_share = [sum(c[2] for c in s["collectives"].values()) / s["cycle_s"] for s in steps if s.get("cycle_s")]
    return {"step_ms": 1e3 * statistics.median(s["step_s"] for s in steps),
            "in_flight_ms": 1e3 * statistics.median(s.get("in_flight_s", 0.0) for s in steps),
            "cycle_ms": median(1e3 * s["cycle_s"] for s in steps if s.get("cycle_s")),
            "coll_ms": 1e3 * statistics.median(sum(c[2] for c in s["collectives"].values()) for s in steps),
            "coll_share": median(coll_share),
            "kinds": {k: {"calls": per_step(k, 0), "bytes": per_step(k, 1), "ms": 1e3 * per_step(k, 2)} for k in kinds},
            "numbers": rank0["trainable_numbers"], "learner_steps": len(rank0["steps"]),
            "placement": [f"{p['hostname']}:{p['cores']}/{sorted({c for ch in p['children'] for c in ch['cores']})}"
                          for p in sorted(probes, key=lambda p: p["rank"])]}


# ----------------------------------------------------------------------------- the raw all-reduce


def allreduce_child(sizes: List[int], seconds_per_size: float, port: int) -> None:
    """A Slurm task of the raw all-reduce: rank SLURM_PROCID of 2, gloo over the nodes' veth interface; rank 0
    prints one JSON line {numbers: median seconds per all-reduce of float32}."""
    import datetime

    import torch
    import torch.distributed as dist

    rank = int(os.environ["SLURM_PROCID"])
    os.environ["GLOO_SOCKET_IFNAME"] = "sfh0"
    dist.init_process_group("gloo", init_method=f"tcp://{NODES['sfn1']}:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    out = {"hosts": [None, None], "cores": sorted(os.sched_getaffinity(0))}
    dist.all_gather_object(out["hosts"], socket.gethostname())
    for n in sizes:
        flat = torch.ones(n)
        for _ in range(5):
            dist.all_reduce(flat)
        count = torch.tensor([0])
        start = time.perf_counter()
        blocks = []
        while True:  # blocks of 10 calls until rank 0's time is up; rank 0 decides for both
            t = time.perf_counter()
            for _ in range(10):
                dist.all_reduce(flat)
            blocks.append((time.perf_counter() - t) / 10)
            count[0] = int(time.perf_counter() - start < seconds_per_size) if rank == 0 else 0
            dist.broadcast(count, 0)
            if not count[0]:
                break
        out[str(n)] = statistics.median(blocks)
    if rank == 0:
        print("ALLREDUCE " + json.dumps(out), flush=True)
    dist.destroy_process_group()


def raw_allreduce(sizes: List[int], seconds_per_size: float, work: Path, timeout: float = 300) -> dict:
    """The raw all-reduce as a 2-task Slurm step, one task per node; {numbers: seconds} and the hosts."""
    port = random.randint(20000, 40000)
    cmd = ["srun", "-p", PARTITION, "-N", "2", "-n", "2", "--ntasks-per-node=1", "-J", "sf_scaling_allreduce",
           sys.executable, str(Path(__file__).resolve()), "--allreduce-child", "--sizes", *map(str, sizes),
           "--seconds-per-size", str(seconds_per_size), "--port", str(port)]
    proc = run_tree(cmd, work / "allreduce.log", cwd=work, env=job_env(), timeout=timeout)
    text = (work / "allreduce.log").read_text()
    lines = [line for line in text.splitlines() if line.startswith("ALLREDUCE ")]
    if proc.returncode != 0 or not lines:
        print(f"raw all-reduce failed (exit {proc.returncode}):\n{text[-2000:]}")
        return {}
    return json.loads(lines[-1][len("ALLREDUCE "):])


def fit_latency_bandwidth(times: Dict[int, float]) -> tuple:
    """(latency s, bandwidth B/s) of t = latency + bytes / bandwidth: the latency is the median time of the
    sizes up to 64 KiB, the bandwidth the median of bytes / (t - latency) over the sizes from 1 MiB. Robust to
    one disturbed size, which a least-squares line over sizes this far apart is not (its intercept follows the
    largest sizes' noise)."""
    small = [t for n, t in times.items() if 4 * n <= 64 * 1024]
    latency = statistics.median(small) if small else 0.0
    rates = [4 * n / (t - latency) for n, t in times.items() if 4 * n >= 2**20 and t > latency]
    return latency, statistics.median(rates) if rates else float("inf")


def link_seconds(nbytes: float, times: Dict[int, float]) -> float:
    """Seconds of one all-reduce of nbytes on the measured link: linear between the two measured sizes around it,
    the smallest size's time below them, the last two sizes' slope above them."""
    points = sorted((4 * n, t) for n, t in times.items())
    if nbytes <= points[0][0] or len(points) == 1:
        return points[0][1]
    for (b0, t0), (b1, t1) in zip(points, points[1:]):
        if nbytes <= b1:
            return t0 + (t1 - t0) * (nbytes - b0) / (b1 - b0)
    (b0, t0), (b1, t1) = points[-2:]
    return t1 + (t1 - t0) * (nbytes - b1) / (b1 - b0)


# ----------------------------------------------------------------------------- the estimate


# Interconnect assumptions of the 8 x 8 estimate (stated, not measured): NVLink within a node, one InfiniBand
# NIC per GPU between nodes; latency per ring step.
NVLINK = {"latency": 8e-6, "bandwidth": 150e9}
INFINIBAND = {"latency": 20e-6, "bandwidth": 20e9}


def hierarchical_allreduce(nbytes: float, gpus: int = 8, nodes: int = 8) -> float:
    """Seconds of one all-reduce of nbytes over nodes x gpus ranks, NCCL-style hierarchical ring: reduce-scatter
    within the node (NVLink), an all-reduce of each 1/gpus shard across the nodes (InfiniBand, a ring per GPU in
    parallel), all-gather within the node. Ring of n ranks on S bytes: 2(n-1) latencies + 2(n-1)/n S / bandwidth
    (the reduce-scatter and the all-gather each half of it)."""
    intra = 2 * (gpus - 1) * NVLINK["latency"] + 2 * (gpus - 1) / gpus * nbytes / NVLINK["bandwidth"]
    shard = nbytes / gpus
    inter = 2 * (nodes - 1) * INFINIBAND["latency"] + 2 * (nodes - 1) / nodes * shard / INFINIBAND["bandwidth"]
    return intra + inter


def small_collective(ranks_across_nodes: int = 8) -> float:
    """Seconds of one small (latency-bound) collective across the nodes: a tree over the nodes, twice (up and
    down), plus the NVLink step within a node."""
    import math

    return 2 * math.ceil(math.log2(ranks_across_nodes)) * INFINIBAND["latency"] + 2 * NVLINK["latency"]


def estimate(results: List[dict], times: Optional[Dict[int, float]]) -> None:
    """What the measured collectives per learner step cost here on the bare link (each call as a raw all-reduce of
    its bytes, link_seconds: the rest of their measured time is waiting for the other rank), and an ESTIMATE for
    8 nodes x 8 GPUs from their count and bytes."""
    rows = []
    for env_name in ENVS:
        two = [r for r in results if r["env"] == env_name and r["nodes"] == 2 and r.get("kinds")]
        if not two:
            continue
        kinds = two[0]["kinds"]
        big = {k: v for k, v in kinds.items() if k.startswith("all_reduce") and v["bytes"] >= 1024 * v["calls"]}
        big_calls = sum(v["calls"] for v in big.values())
        per_call = sum(v["bytes"] for v in big.values()) / big_calls if big_calls else 0
        small_calls = sum(v["calls"] * (2 if k == "all_gather_object" else 1) for k, v in kinds.items() if k not in big)
        link = None
        if times:  # every collective as all-reduces of its bytes on this link (an object gather: size, then bytes)
            link = sum(v["calls"] * (2 if k == "all_gather_object" else 1)
                       * link_seconds(v["bytes"] / v["calls"], times) for k, v in kinds.items() if v["calls"])
        t = big_calls * hierarchical_allreduce(per_call) + small_calls * small_collective()
        rows.append([env_name, f"{big_calls:.0f} x {per_call / 1024:,.1f} KiB", f"{small_calls:.0f}",
                     fmt(median(r.get("coll_ms") for r in two), ".1f"), fmt(link and 1e3 * link, ".1f"),
                     fmt(1e3 * t, ".2f"), fmt(t / (t + 0.010), ".2f"), fmt(t / (t + 0.050), ".2f")])
    if not rows:
        return
    print("\nCollectives per learner step: measured on the two nodes (rank 0, waiting included), the bare link's "
          "cost of the same calls (the raw all-reduce's times at their sizes), and an ESTIMATE (not measured) "
          f"for 8 nodes x 8 GPUs with assumed links: NVLink {NVLINK['bandwidth'] / 1e9:.0f} GB/s, "
          f"{NVLINK['latency'] * 1e6:.0f} us per ring step; "
          f"InfiniBand {INFINIBAND['bandwidth'] / 1e9:.0f} GB/s per GPU, {INFINIBAND['latency'] * 1e6:.0f} us per "
          "step; a hierarchical ring for the gradients, a tree for the small collectives (an object gather is two); "
          "its share of an assumed GPU learner step of 10 or 50 ms.")
    print_table(["env", "gradient all-reduces", "small", "measured ms", "link ms", "ESTIMATE 8x8 ms",
                 "share (10 ms step)", "share (50 ms step)"], rows)
    print("Each rank samples on its own; FPS(64) ~ 64 x FPS(1 GPU) x step / (step + collectives) while the "
          "learner is the limit. First to measure on real hardware: (1) one rank's learner step and FPS on one "
          "GPU with its share of the node's cores; (2) nccl all-reduce of the model's gradients at 8 and 64 ranks "
          "(nccl-tests all_reduce_perf, sizes above); (3) the small collectives' latency at 64 ranks (latency-bound, "
          "the statistics gathered as JSON in byte tensors: the first to fold into one all-reduce if they dominate); "
          "(4) learning per frame with a 64x larger update batch (steps to target at equal per-rank batch).")


# ----------------------------------------------------------------------------- report


def report(results: List[dict], envs: List[str]) -> None:
    """The per-run table, then per env and layout the medians and the scaling efficiency."""
    rows = [[r["env"], str(r["nodes"]), str(r["repeat"]), fmt(r["fps"]), fmt(r.get("step_ms"), ".1f"),
             fmt(r.get("cycle_ms"), ".1f"), fmt(r.get("coll_ms"), ".2f"), fmt(r.get("coll_share"), ".3f"),
             fmt(r["steps"]), fmt(r["train_s"], ".0f"), fmt(r["final"], ".1f"), fmt(r["wall"], ".0f"),
             fmt(r["load"], ".2f"), fmt(r["other_cpu"], ".2f"), " ".join(r.get("placement", [])),
             "" if r["ok"] and r.get("exit", 0) == 0 else "FAILED"] for r in results]
    print_table(["env", "nodes", "rep", "FPS", "step ms", "cycle ms", "coll ms", "coll share", "steps to target",
                 "s to target", "final return", "wall s", "load1", "other CPU", "host:cores/children", ""], rows)
    print()
    summary = []
    for env_name in envs:
        one = [r for r in results if r["env"] == env_name and r["nodes"] == 1]
        two = [r for r in results if r["env"] == env_name and r["nodes"] == 2]
        f1, f2 = median(r["fps"] for r in one), median(r["fps"] for r in two)
        for nodes, mine in ((1, one), (2, two)):
            kinds = next((r["kinds"] for r in mine if r.get("kinds")), {})
            nbytes = sum(k["bytes"] for k in kinds.values())
            detail = ", ".join(f"{k} {v['calls']:.0f}x {v['bytes'] / 1024:,.1f} KiB" for k, v in kinds.items())
            summary.append([env_name, str(nodes), fmt(median(r["fps"] for r in mine)),
                            fmt(f2 / (2 * f1), ".2f") if nodes == 2 and f1 and f2 else "",
                            fmt(median(r.get("step_ms") for r in mine), ".1f"),
                            fmt(median(r.get("coll_share") for r in mine), ".3f"),
                            fmt(nbytes / 1024, ",.1f") if kinds else "-", detail or "-",
                            fmt(median(r["steps"] for r in mine)), fmt(median(r["train_s"] for r in mine), ".0f"),
                            fmt(next((r.get("numbers") for r in mine if r.get("numbers")), None), ",")])
    print_table(["env", "nodes", "median FPS", "efficiency", "step ms", "coll share", "KiB/step", "by kind",
                 "steps to target", "s to target", "model numbers"], summary)


def layout_medians(results: List[dict], env_name: str) -> Dict[int, dict]:
    """Per layout (nodes) of one env: median FPS, step ms, collectives' ms and share; the efficiency on 2."""
    out = {}
    for nodes in (1, 2):
        mine = [r for r in results if r["env"] == env_name and r["nodes"] == nodes]
        out[nodes] = {"fps": median(r["fps"] for r in mine), "step_ms": median(r.get("step_ms") for r in mine),
                      "coll_ms": median(r.get("coll_ms") for r in mine),
                      "coll_share": median(r.get("coll_share") for r in mine), "runs": len(mine)}
    f1, f2 = out[1]["fps"], out[2]["fps"]
    out[2]["efficiency"] = f2 / (2 * f1) if f1 and f2 else None
    return out


def compare(before: Path, after: Path) -> None:
    """A Markdown table for docs/results.md: per env, two nodes' scaling efficiency and the collectives' share of
    rank 0's learner step cycle, from two earlier measurements' results.json (before and after a change)."""
    runs = {name: json.loads(path.read_text()) for name, path in (("before", before), ("after", after))}
    envs = [e for e in runs["before"]["envs"] if e in runs["after"]["envs"]]
    print("| env | | FPS 1 node | FPS 2 nodes | efficiency | step ms (2 nodes) | collectives ms | collectives' share "
          "| runs per layout |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for env_name in envs:
        for name, saved in runs.items():
            m = layout_medians(saved["results"], env_name)
            print(f"| {env_name} | {name} | {fmt(m[1]['fps'])} | {fmt(m[2]['fps'])} | {fmt(m[2]['efficiency'], '.2f')} "
                  f"| {fmt(m[2]['step_ms'], '.1f')} | {fmt(m[2]['coll_ms'], '.1f')} | {fmt(m[2]['coll_share'], '.3f')} "
                  f"| {m[2]['runs']} |")


def main(argv=None) -> None:
    """The command line: the measurement (or `--report` of an earlier one), or a raw all-reduce task under srun."""
    if argv is None and "--allreduce-child" in sys.argv:
        child = argparse.ArgumentParser()
        child.add_argument("--allreduce-child", action="store_true")
        child.add_argument("--sizes", type=int, nargs="+")
        child.add_argument("--seconds-per-size", type=float)
        child.add_argument("--port", type=int)
        a = child.parse_args()
        allreduce_child(a.sizes, a.seconds_per_size, a.port)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--doom-seconds", type=float, default=30.0, help="Doom basic's training budget per run")
    parser.add_argument("--quick", action="store_true",
                        help="one repeat, CartPole capped at 60k env steps, Doom 20 s, a short raw all-reduce")
    parser.add_argument("--skip-allreduce", action="store_true", help="no raw all-reduce between the nodes")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per run before it is killed")
    parser.add_argument("--wait-free", type=float, default=600.0,
                        help="before each run, wait up to this long for the two-node partition to be empty")
    parser.add_argument("--work-dir", type=Path, default=None, help="keep runs here (default: a temp dir)")
    parser.add_argument("overrides", nargs="*", help="after `--`: extra Hydra overrides for every run")
    parser.add_argument("--report", type=Path, default=None, metavar="RESULTS_JSON",
                        help="print the tables of an earlier measurement (its work folder's results.json), run nothing")
    parser.add_argument("--compare", type=Path, nargs=2, default=None, metavar=("BEFORE_JSON", "AFTER_JSON"),
                        help="a Markdown table of two measurements (efficiency, collectives' share), run nothing")
    args, work = start_benchmark(parser, argv, "scaling_")
    if args.compare:
        compare(*args.compare)
        return
    if args.report:
        saved = json.loads(args.report.read_text())
        present(saved["results"], saved["raw"], saved["envs"])
        return
    problem = two_nodes_problem()
    if problem:
        raise SystemExit(f"benchmarks/scaling.py needs the two-node Slurm cluster: {problem}")
    repeats = 1 if args.quick else args.repeats
    modes = {"cartpole": ["train_for_env_steps=60000"] if args.quick else [],
             "doom_basic": [f"train_for_seconds={20 if args.quick else args.doom_seconds:g}"]}
    print(f"work folder {work}; load average {os.getloadavg()}; cores {os.cpu_count()}", flush=True)
    results = []
    for repeat in range(repeats):
        for env_name in args.envs:
            for nodes in (1, 2):  # alternate: a change of the machine's load hits both layouts alike
                wait_for_free_nodes(args.wait_free)
                r = run(env_name, nodes, repeat, work, modes[env_name], args.overrides, args.timeout)
                results.append(r)
                print(f"{env_name} {nodes} node(s) repeat {repeat}: FPS {fmt(r['fps'])}, step "
                      f"{fmt(r.get('step_ms'), '.1f')} ms, collectives {fmt(r.get('coll_share'), '.3f')} of the cycle, "
                      f"target at {fmt(r['steps'])} steps / {fmt(r['train_s'], '.0f')} s, wall {r['wall']:.0f} s, "
                      f"load {r['load']:.2f}{'' if r['ok'] else ', FAILED: ' + r['log']}", flush=True)
    raw = {}
    if not args.skip_allreduce:
        numbers = {r["env"]: r["numbers"] for r in results if r.get("numbers")}
        sizes = sorted(set(SWEEP_SIZES[:4] if args.quick else SWEEP_SIZES) | set(numbers.values()))
        wait_for_free_nodes(args.wait_free)
        raw = raw_allreduce(sizes, 0.5 if args.quick else 2.0, work)
        raw["load"] = loadavg()
    (work / "results.json").write_text(json.dumps({"results": results, "raw": raw, "envs": args.envs}, indent=1))
    present(results, raw, args.envs)


def present(results: List[dict], raw: dict, envs: List[str]) -> None:
    """The tables: per run and per layout, the raw all-reduce and its fit, the estimate."""
    print()
    report(results, envs)
    fit = None
    if raw.get("hosts"):
        numbers = {r["env"]: r["numbers"] for r in results if r.get("numbers")}
        times = {int(k): v for k, v in raw.items() if k.isdigit()}
        fit = fit_latency_bandwidth(times)
        named = {n: e for e, n in numbers.items()}
        print(f"\nRaw gloo all-reduce of float32, 2 ranks, {raw['hosts'][0]} <-> {raw['hosts'][1]} over the veth "
              f"bridge (rank 0 on cores {raw['cores']}); load {raw.get('load', float('nan')):.2f}")
        print_table(["numbers", "KiB", "us per all-reduce", "MB/s (bytes / time)", "model"],
                    [[f"{n:,}", fmt(4 * n / 1024, ",.1f"), fmt(t * 1e6, ",.0f"), fmt(4 * n / t / 1e6, ",.0f"),
                      named.get(n, "")] for n, t in sorted(times.items())])
        print(f"fit: latency {fit[0] * 1e6:.0f} us + bytes / {fit[1] / 1e6:,.0f} MB/s")
    estimate(results, times if fit else None)


if __name__ == "__main__":
    main()
