"""Reads an offline W&B run's `run-<id>.wandb` file back (what `wandb sync` would upload).

The file is a LevelDB-style log: a 7-byte header (":W&B", magic 0xBEE1, version 0), then
32 KiB blocks of chunks, each `crc32 (4 bytes) | length (2) | type (1) | data`, a record's
chunks typed FULL, or FIRST, MIDDLE..., LAST. Each record is a `wandb_internal_pb2.Record`.
wandb >= 0.19 no longer ships a Python reader for it (the Go core writes it), hence this one.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Dict, Iterator, List

BLOCK = 32 * 1024
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def raw_records(path: Path) -> Iterator[bytes]:
    data = Path(path).read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:7])
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), f"{path}: not a W&B run file"
    pos, pending = 7, b""
    while pos + CHUNK_HEADER <= len(data):
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < CHUNK_HEADER:  # block tail padding
            pos += left_in_block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + CHUNK_HEADER])
        chunk = data[pos + CHUNK_HEADER:pos + CHUNK_HEADER + length]
        pos += CHUNK_HEADER + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
            pending = b""
        else:  # zero padding at the end of a block
            pos += left_in_block - CHUNK_HEADER - length


def records(path: Path):
    from wandb.proto import wandb_internal_pb2 as pb

    for raw in raw_records(path):
        record = pb.Record()
        record.ParseFromString(raw)
        yield record


def read_run(path: Path) -> dict:
    """The run record's id, group, project, name and config (nested dicts), and the history:
    {key: [values, in order]}."""
    run: dict = {}
    config: Dict[str, object] = {}
    history: Dict[str, List[object]] = {}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.update(id=r.run_id, group=r.run_group, project=r.project, name=r.display_name, job_type=r.job_type,
                       tags=list(r.tags), entity=r.entity)
            config.update({item.key: json.loads(item.value_json) for item in r.config.update})
        elif kind == "config":
            config.update({item.key: json.loads(item.value_json) for item in record.config.update})
        elif kind == "history":
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                history.setdefault(key, []).append(json.loads(item.value_json))
    return {**run, "config": config, "history": history}


def run_files(run_dir: Path) -> List[Path]:
    """The `.wandb` files of a run folder's offline W&B runs, oldest first."""
    return sorted(Path(run_dir).glob("wandb/offline-run-*/run-*.wandb"))
