"""Writing a file so that a reader sees the whole new file or the previous one, never a part.

Invariants: `write_atomically(path, write)` has `write` fill a temporary file in the same
folder (so the rename stays on one file system) and renames it onto `path` (os.replace,
atomic on POSIX). The temporary name is hidden, ends in `.tmp`, and is unique to the call
(processes or threads writing the same path at once never share one). When `write` or the
rename fails, the temporary file is removed (best effort) and the error propagates: `path`
is left as it was. A process killed mid-write leaves its `*.tmp` behind; whoever owns the
folder removes those (run_dir.prepare for checkpoints). `link_atomically(source, path)` gives
`source`'s file a second name the same way (a hard link made under a temporary name, then renamed
onto `path`): no second copy of the bytes, and `path` stays readable when `source` is deleted.
Stdlib only: any layer may use it."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Callable


def temporary_name(path: Path) -> Path:
    """A hidden `.tmp` file beside `path`, unique to this call."""
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """`write(tmp)` writes the content to the temporary path `tmp`; it is then renamed onto `path`."""
    path = Path(path)
    tmp = temporary_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise


def link_atomically(source: Path, path: Path) -> None:
    """`path` becomes a hard link to `source` (one file, two names; the same folder's file system),
    replacing what `path` named atomically. OSError where the file system has no hard links (or
    `source` is on another one): `path` is then left as it was."""
    write_atomically(Path(path), lambda tmp: os.link(source, tmp))
