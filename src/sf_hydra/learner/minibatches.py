"""The minibatch layout of a learner iteration: which recurrence chunks of a policy's batch an epoch trains on
(its own: with several policies a batch may hold another policy's transitions) and where each minibatch
begins and ends among them. Pure functions of the chunked data ([chunks, recurrence] tensors, the PPO
learner's `_chunks`), and the micro-batches of a minibatch."""

from __future__ import annotations

from typing import List, Optional, Tuple


def minibatch_bounds(data: dict, per_minibatch: int, full_chunks: Optional[int] = None) -> Tuple[dict, List[int]]:
    """The chunks an epoch trains on and its minibatches' bounds among them (`per_minibatch`: the chunks of a
    minibatch, algo.batch_size over the recurrence). Chunks that hold none of this policy's transitions
    (another policy acted there: `valids` all zero) are left out, so no forward or backward pass is spent on
    them, and `valids` goes where every chunk left is wholly the policy's own (always so for feed-forward
    models, one transition per chunk). Invariant: an epoch has as many minibatches as the whole batch gives,
    ceil(chunks / per_minibatch); a batch with no chunk left out keeps the plain slices of that many chunks,
    the kept chunks of another spread evenly over them (what each minibatch averages over is the policy's own
    transitions either way). `full_chunks`: the chunks of a full batch, for a batch that took more
    trajectories to hold a full batch's own transitions (TrainingBatches, several policies): it gets a full
    batch's minibatches, not more."""
    n = data["actions"].shape[0]
    plain = [*range(0, n, per_minibatch), n]
    oversized = full_chunks is not None and n > full_chunks
    if "valids" not in data and not oversized:
        return data, plain
    data = own_chunks(data)
    kept = data["actions"].shape[0]
    if kept == n and not oversized:
        return data, plain
    minibatches = min(len(range(0, full_chunks, per_minibatch)) if oversized else len(plain) - 1, kept)
    return data, [kept * i // minibatches for i in range(minibatches + 1)] if minibatches else [0]


def own_chunks(data: dict) -> dict:
    """The chunks holding any of the policy's transitions (`valids`), `valids` left out where every
    chunk kept is wholly the policy's own; data without `valids` as it is."""
    if "valids" not in data:
        return data
    mine = data["valids"] > 0
    keep = mine.any(dim=1)
    if not bool(keep.all()):
        data = {k: v[keep] for k, v in data.items()}
    if bool(mine[keep].all()):
        data = {k: v for k, v in data.items() if k != "valids"}
    return data


def full_chunks(meta: dict, rollout: int, recurrence: int) -> Optional[int]:
    """The recurrence chunks of a full batch when this one took more trajectories (of `rollout` steps) than a
    full batch (`meta["full_trajectories"]`, set by TrainingBatches); None otherwise."""
    full = meta.get("full_trajectories")
    return None if not full else full * rollout // recurrence


def micro_batches(mb: dict, micro_batch: int, recurrence: int) -> List[Tuple[dict, Optional[float]]]:
    """(part, its weight: its share of the policy's transitions) of each micro-batch of whole recurrence chunks
    (`micro_batch` transitions, 0: the whole minibatch) that holds some of them; the whole minibatch with no
    weight when it is one pass of one policy."""
    valid = mb.get("valids")
    rows = mb["actions"].shape[0]
    step = max(1, micro_batch // recurrence) if micro_batch > 0 else rows
    if step >= rows and valid is None:
        return [(mb, None)]
    # with several policies a micro-batch may hold none of this one's transitions (the host reads its share)
    total = float(valid.sum()) if valid is not None else float(rows)
    parts = []
    for start in range(0, rows, step):
        part = {k: v[start : start + step] for k, v in mb.items()}
        share = float(part["valids"].sum()) if valid is not None else float(part["actions"].shape[0])
        if share > 0:
            parts.append((part, share / total))
    return parts
