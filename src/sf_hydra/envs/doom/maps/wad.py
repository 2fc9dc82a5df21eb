"""The WAD container: a header, the lumps' bytes, then a directory of (offset, size, name).

Only what a PWAD with one UDMF map needs: writing, and reading back (for checks and tests).
"""

from __future__ import annotations

import struct
from typing import List, Sequence, Tuple

Lump = Tuple[str, bytes]

_HEADER = struct.Struct("<4sii")  # kind, number of lumps, directory offset
_ENTRY = struct.Struct("<ii8s")  # lump offset, lump size, name (NUL-padded)


def _lump_name(name: str) -> bytes:
    raw = name.upper().encode("ascii")
    if not 1 <= len(raw) <= 8:
        raise ValueError(f"a WAD lump name has 1 to 8 ASCII characters, got {name!r}")
    return raw


def write_wad(lumps: Sequence[Lump], kind: bytes = b"PWAD") -> bytes:
    body, directory, offset = [], [], _HEADER.size
    for name, data in lumps:
        directory.append(_ENTRY.pack(offset, len(data), _lump_name(name)))
        body.append(data)
        offset += len(data)
    return _HEADER.pack(kind, len(lumps), offset) + b"".join(body) + b"".join(directory)


def read_wad(data: bytes) -> List[Lump]:
    kind, count, dir_offset = _HEADER.unpack_from(data, 0)
    if kind not in (b"PWAD", b"IWAD"):
        raise ValueError(f"not a WAD file (header {kind!r})")
    lumps = []
    for i in range(count):
        offset, size, name = _ENTRY.unpack_from(data, dir_offset + i * _ENTRY.size)
        lumps.append((name.rstrip(b"\0").decode("ascii"), data[offset : offset + size]))
    return lumps


def map_lumps(map_name: str, textmap: str) -> List[Lump]:
    """A UDMF map: a marker lump, TEXTMAP, ENDMAP. The engine builds the nodes itself."""
    return [(map_name, b""), ("TEXTMAP", textmap.encode("ascii")), ("ENDMAP", b"")]
