"""The learner's collectives between two real gloo ranks (learner/ddp.py): gradients averaged in buckets while
the backward pass runs, with the loss statistics in the last bucket; one reduction for the advantage moments of
every minibatch of a step; every rank's value gathered as JSON in tensors, checked on receipt."""

import json

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sf_hydra.app.ranks import free_port
from sf_hydra.learner import ddp

# Layers of WIDTH x WIDTH float32, each about 0.6 of a bucket (BUCKET_MB): four of them fill more than one
WIDTH = int((0.6 * ddp.BUCKET_MB * 2**20 / 4) ** 0.5)


class Layers(torch.nn.Module):
    """A policy's shape as the learner sees it: `evaluate` is its learner forward."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.hidden = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh())
                                            for _ in range(4)])
        self.out = torch.nn.Linear(WIDTH, 1)

    def evaluate(self, x):
        return self.out(self.hidden(x)).mean()


def _data(rank: int) -> torch.Tensor:
    return torch.randn(8, WIDTH, generator=torch.Generator().manual_seed(10 + rank))


def _gradient_rank(rank: int, port: int, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        model = Layers()
        sync = ddp.GradientSync(model)
        launched, in_backward = [], [False]
        all_reduce = dist.all_reduce

        def counted(tensor, *args, **kwargs):  # the reducer's buckets go through the module's all_reduce
            launched.append((tensor.numel(), in_backward[0]))
            return all_reduce(tensor, *args, **kwargs)

        dist.all_reduce = counted
        for _ in range(2):  # two minibatches: DDP's reducer sizes its buckets after the first
            model.zero_grad(set_to_none=True)
            launched.clear()
            parts = _data(rank).split(4)  # two micro-batches: the first keeps its gradient local
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                with sync.accumulating(last):
                    loss = sync.evaluate(part) * 0.5
                    if last:
                        sync.carry(torch.tensor([float(rank), 10.0 * rank]))
                    in_backward[0] = True
                    loss.backward()
                    in_backward[0] = False
            scalars = sync.carried()
        torch.save({"grads": [p.grad for p in model.parameters()], "scalars": scalars,
                    "launched": launched}, f"{out}/rank_{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_gradients_are_averaged_in_buckets_during_backward_with_the_statistics(tmp_path):
    mp.start_processes(_gradient_rank, args=(free_port(), str(tmp_path)), nprocs=2, start_method="spawn")
    got = [torch.load(tmp_path / f"rank_{r}.pt") for r in (0, 1)]
    model = Layers()
    torch.stack([model.evaluate(_data(r)) for r in (0, 1)]).mean().backward()  # one process, both ranks' data
    for rank in got:
        for mine, expected in zip(rank["grads"], model.parameters()):
            assert torch.allclose(mine, expected.grad, atol=1e-6)
        assert torch.allclose(rank["scalars"], torch.tensor([0.5, 5.0]))
    for a, b in zip(got[0]["grads"], got[1]["grads"]):
        assert torch.equal(a, b), "the ranks' averaged gradients differ"
    launched = got[0]["launched"]
    assert len(launched) >= 2 and all(during for _, during in launched), launched  # buckets, inside backward
    numbers = sum(p.numel() for p in model.parameters())
    assert sum(n for n, _ in launched) == numbers + 2, launched  # the last bucket carries the 2 statistics


def _moments_rank(rank: int, port: int, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        calls = []
        all_reduce = dist.all_reduce
        dist.all_reduce = lambda *a, **k: calls.append(1) or all_reduce(*a, **k)
        pieces = [_data(rank)[:3 + rank].reshape(-1), _data(rank)[5:, :7].reshape(-1), torch.tensor([float(rank)])]
        torch.save({"moments": ddp.moments(pieces), "calls": len(calls)}, f"{out}/rank_{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_moments_of_every_piece_take_one_reduction(tmp_path):
    mp.start_processes(_moments_rank, args=(free_port(), str(tmp_path)), nprocs=2, start_method="spawn")
    got = [torch.load(tmp_path / f"rank_{r}.pt", weights_only=False) for r in (0, 1)]
    assert [g["calls"] for g in got] == [1, 1]
    together = [torch.cat([_data(0)[:3].reshape(-1), _data(1)[:4].reshape(-1)]),
                torch.cat([_data(r)[5:, :7].reshape(-1) for r in (0, 1)]), torch.tensor([0.0, 1.0])]
    for (count, mean, std), expected in zip(got[0]["moments"], together):
        assert count == expected.numel()
        assert torch.allclose(mean, expected.mean(), atol=1e-6) and torch.allclose(std, expected.std(), atol=1e-5)
    assert got[0]["moments"] == got[1]["moments"]


LONG = "x" * (3 * ddp.SLOT_BYTES)


def _gather_rank(rank: int, port: int, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        calls = []
        all_gather = dist.all_gather
        dist.all_gather = lambda *a, **k: calls.append(1) or all_gather(*a, **k)
        short = ddp.gather({"rank": rank, "reason": None, "seconds": 1.5 * rank, "due": (True, rank == 1)})
        n_short = len(calls)
        long = ddp.gather(["ü", LONG] if rank == 1 else rank)
        _write({"short": short, "long": long, "calls": [n_short, len(calls) - n_short]}, f"{out}/rank_{rank}.json")
    finally:
        dist.destroy_process_group()


def _write(value, path: str) -> None:
    with open(path, "w") as f:
        json.dump(value, f)


@pytest.mark.slow
def test_gather_sends_json_in_tensors_one_collective_unless_long(tmp_path):
    mp.start_processes(_gather_rank, args=(free_port(), str(tmp_path)), nprocs=2, start_method="spawn")
    for r in (0, 1):
        got = json.loads((tmp_path / f"rank_{r}.json").read_text())
        assert got["short"] == [{"rank": 0, "reason": None, "seconds": 0.0, "due": [True, False]},
                                {"rank": 1, "reason": None, "seconds": 1.5, "due": [True, True]}]
        assert got["long"] == [0, ["ü", LONG]]
        assert got["calls"] == [1, 2]  # a second all-gather only for the long value


def test_a_slot_that_is_not_json_or_out_of_range_raises_naming_the_rank():
    slot = ddp._slots(b"{not json", 16, torch.device("cpu"))
    with pytest.raises(ValueError, match="learner rank 1 sent a value that is not JSON"):
        ddp._decoded(1, slot, 9)
    with pytest.raises(ValueError, match="learner rank 1 sent a value of 17 bytes in a slot of 16"):
        ddp._decoded(1, slot, 17)
    assert ddp._decoded(0, ddp._slots(b'[1,"a"]', 16, torch.device("cpu")), 7) == [1, "a"]
