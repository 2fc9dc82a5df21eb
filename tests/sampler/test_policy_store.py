"""The policy store between the learner and the rollout workers: a reader never sees half
of one publish and half of another, and a reader killed in the middle of a read holds
nothing the learner then waits for (a shared lock did: a worker killed by Slurm's SIGTERM
while it held the lock froze the learner before its final checkpoint)."""

import multiprocessing as mp
import os
import signal
import threading
import time

import torch
from torch import nn

from sf_hydra.sampler.policy_store import PolicyStore


def filled(value: float) -> nn.Module:
    model = nn.Sequential(nn.Linear(64, 256), nn.Linear(256, 64))
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


def test_a_reader_sees_one_whole_publish():
    store = PolicyStore(filled(0.0))
    models = [filled(float(v)) for v in range(1, 4)]
    stop = threading.Event()

    def write():  # as fast as a learner could: a publish, then a pause far shorter than any SGD step
        i = 0
        while not stop.is_set():
            store.publish(models[i % 3], version=i + 1)
            i += 1
            time.sleep(0.0002)

    writer = threading.Thread(target=write)
    writer.start()
    reader = filled(-1.0)
    versions = set()
    try:
        for _ in range(300):
            versions.add(store.load_into(reader))
            values = torch.cat([p.detach().reshape(-1) for p in reader.parameters()]).unique()
            assert len(values) == 1, values  # every tensor from the same publish
    finally:
        stop.set()
        writer.join()
    assert len(versions) > 10  # the reads did overlap the writer's work


def _read_forever(store: PolicyStore) -> None:
    model = filled(0.0)
    while True:
        store.load_into(model)


def test_a_reader_killed_mid_read_never_blocks_the_writer():
    store = PolicyStore(filled(0.0))
    ctx = mp.get_context("fork")
    for i in range(10):
        reader = ctx.Process(target=_read_forever, args=(store,), daemon=True)
        reader.start()
        time.sleep(0.05 + 0.01 * i)  # somewhere inside a read, most likely
        os.kill(reader.pid, signal.SIGKILL)
        reader.join()
        t0 = time.monotonic()
        store.publish(filled(float(i)), version=i + 1)
        assert time.monotonic() - t0 < 1.0
    check = filled(-1.0)
    assert store.load_into(check) == 10 and float(next(check.parameters()).flatten()[0]) == 9.0


def _report_versions(store: PolicyStore, asked, answers) -> None:
    while (want := asked.get()) is not None:
        deadline = time.monotonic() + 10
        while store.current_version() != want and time.monotonic() < deadline:
            time.sleep(0.001)
        answers.put(store.current_version())


def test_another_process_reads_every_published_version():
    # current_version reads through a numpy view made in the reading process: it must be a view of
    # the shared counter there (not a copy pickled with the store), made after the store arrived.
    store = PolicyStore(filled(0.0))
    assert store.current_version() == 0  # the learner's own view exists before the store is sent
    ctx = mp.get_context("spawn")
    asked, answers = ctx.Queue(), ctx.Queue()
    reader = ctx.Process(target=_report_versions, args=(store, asked, answers), daemon=True)
    reader.start()
    try:
        for version in (3, 4, 9):
            store.publish(filled(float(version)), version=version)
            asked.put(version)
            assert answers.get(timeout=60) == version
    finally:
        asked.put(None)
        reader.join(timeout=30)
