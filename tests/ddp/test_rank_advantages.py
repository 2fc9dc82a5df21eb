"""Advantages are normalized over the whole minibatch of a data-parallel step, every rank's share of it, as one
rank normalizes a minibatch of the same transitions (two real gloo ranks)."""

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sf_hydra.app.ranks import free_port
from sf_hydra.learner.ppo_learner import advantage_moments, normalized_advantages


def _rank(rank: int, port: int, adv: torch.Tensor, valid, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        half = slice(0, 6) if rank == 0 else slice(6, 16)  # unequal shares, as the policy's valid transitions are
        torch.save(_normalized(adv[half], None if valid is None else valid[half]), f"{out}/rank_{rank}.pt")
    finally:
        dist.destroy_process_group()


def _normalized(adv: torch.Tensor, valid):
    """The advantages normalized as the learner normalizes a minibatch of one epoch without shuffling."""
    data = {"advantages": adv} if valid is None else {"advantages": adv, "valids": valid}
    return normalized_advantages(adv, valid, advantage_moments(data, [None], [(0, adv.shape[0])])[0])


@pytest.mark.parametrize("masked", [False, True])
def test_two_ranks_normalize_their_minibatch_as_one(tmp_path, masked):
    gen = torch.Generator().manual_seed(0)
    adv = torch.randn(16, generator=gen) * 3.0 + torch.arange(16.0)  # each rank's half has its own mean
    valid = (torch.rand(16, generator=gen) > 0.3).float() if masked else None
    mp.start_processes(_rank, args=(free_port(), adv, valid, str(tmp_path)),
                       nprocs=2, start_method="spawn")
    together = torch.cat([torch.load(tmp_path / f"rank_{r}.pt") for r in (0, 1)])
    one_rank = _normalized(adv, valid)
    assert torch.allclose(together, one_rank, atol=1e-5), (together, one_rank)
    assert not masked or torch.equal(together[valid == 0], torch.zeros(int((valid == 0).sum())))
