"""The data-parallel learner's collectives on nccl with one rank, on the GPU, with the Doom model's sizes: a GPU
check for benchmarks/gpu_check.sh (it refuses, exit 2, without CUDA).

    python benchmarks/gpu_collectives.py                  # Doom basic's model
    python benchmarks/gpu_collectives.py --env gym/cartpole --repeats 500

A process group of one rank on backend nccl (what Lightning's DDP strategy makes on CUDA, learner/ddp.py), then
each collective a data-parallel learner step makes, with its real payload on the GPU: the broadcast of every
parameter and buffer when training starts (AllReduceDDP.configure_ddp), the all-reduce of the flattened
gradients plus the loss scalars (GradientSync's buckets, here as one), the float64 moments (moments), the
all-gather of the normalizer's moments, and the all-gather of a JSON slot (gather: the stop and checkpoint
decisions, SLOT_BYTES of uint8 and its length). Each is checked (one
rank: the result equals the input) and timed (median over --repeats, CUDA synchronized). With one rank nccl
copies instead of sending: these times are its launch and synchronization cost, the floor of any all-reduce on
this GPU; the wire's share needs two GPUs.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, print_table  # noqa: E402


def refuse_without_cuda() -> None:
    """Exit 2 with a sentence when this machine has no CUDA device for torch (nothing else runs)."""
    try:
        import torch
    except ImportError as e:
        raise SystemExit(f"gpu_collectives.py needs torch with CUDA: torch is not importable ({e})") from None
    if not torch.cuda.is_available():
        print("gpu_collectives.py needs a CUDA device: torch.cuda.is_available() is False here "
              f"(torch {torch.__version__}); nothing measured", file=sys.stderr)
        raise SystemExit(2)


def build_model(env: str):
    """The env config's initial policy (sf_hydra's plan: the model the learner trains), on the GPU."""
    from hydra import compose, initialize_config_dir

    from sf_hydra.config import register_configs, validate
    from sf_hydra.plan import plan_run
    from sf_hydra.sampler.env_info import describe_env

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[f"env={env}"])
    validate(cfg)
    return plan_run(cfg, describe_env(cfg.env, seed=0)).initial_policies[0].cuda()


def timed(fn, repeats: int) -> float:
    """Median seconds of fn() over `repeats` calls, each ended by a CUDA synchronize (5 calls of warm-up)."""
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="doom/basic")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args(argv)
    refuse_without_cuda()
    import torch
    import torch.distributed as dist

    from sf_hydra.app.ranks import free_port
    from sf_hydra.learner.ddp import SLOT_BYTES

    torch.cuda.set_device(0)
    model = build_model(args.env)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    try:
        params = [p for p in model.parameters() if p.requires_grad]
        numbers = sum(p.numel() for p in params)
        flat = torch.cat([torch.randn(p.numel(), device="cuda") for p in params] + [torch.randn(4, device="cuda")])
        expected = flat.clone()
        moments = torch.randn(3, dtype=torch.float64, device="cuda")
        stats = torch.randn(2 * 128 * 72 * 3 + 1, device="cuda")  # a per-pixel normalizer's mean, var and count
        gathered = [torch.empty_like(stats)]
        slot = torch.randint(0, 256, (8 + SLOT_BYTES,), dtype=torch.uint8, device="cuda")
        slots = [torch.empty_like(slot)]
        weights = [*model.parameters(), *model.buffers()]
        rows = [
            ["broadcast of the weights (start)", f"{sum(t.numel() for t in weights):,}",
             timed(lambda: [dist.broadcast(t, 0) for t in weights], max(args.repeats // 10, 5))],
            ["all-reduce of the gradients", f"{flat.numel():,}", timed(lambda: dist.all_reduce(flat), args.repeats)],
            ["all-reduce of float64 moments", "3", timed(lambda: dist.all_reduce(moments), args.repeats)],
            ["all-gather of normalizer moments", f"{stats.numel():,}",
             timed(lambda: dist.all_gather(gathered, stats), args.repeats)],
            ["all-gather of a JSON slot (a decision)", f"{slot.numel():,}",
             timed(lambda: dist.all_gather(slots, slot), args.repeats)],
        ]
        torch.cuda.synchronize()
        assert torch.equal(flat, expected), "one rank's nccl all-reduce changed the gradients"
        assert torch.equal(gathered[0], stats) and torch.equal(slots[0], slot), "one rank's gathers differ"
    finally:
        dist.destroy_process_group()
    nccl = torch.cuda.nccl.version()  # a tuple in recent torch, an int in older ones
    nccl = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    print(f"{torch.cuda.get_device_name()}: nccl {nccl}, one rank; "
          f"{args.env} model: {numbers:,} trainable numbers ({4 * numbers / 2**20:.2f} MiB of float32 gradients)")
    print_table(["collective", "numbers", "us (median)"], [[a, b, f"{t * 1e6:,.1f}"] for a, b, t in rows])
    print("results checked: one rank's collectives return their input")


if __name__ == "__main__":
    main()
