"""Writing a file so that a reader sees the whole new file or the previous one, never a part, even after the
machine itself stops (a power loss, a lost node): the one writer of every file a user keeps.

Invariants: `write_atomically(path, write)` has `write` fill a temporary file in the same folder (so the
rename stays on one file system), flushes that file to the disk (fsync), renames it onto `path` (os.replace,
atomic on POSIX) and then flushes the folder (fsync of the directory), which makes the rename itself durable.
Without the first fsync, a crash of the machine shortly after the rename can leave `path` naming an empty or
partial file (the rename reached the disk, the data not yet); without the second, `path` can name the previous
file again. The temporary name is hidden, ends in `.tmp`, and is unique to the call (processes or threads writing
the same path at once never share one). When `write`, the fsync or the rename fails, the temporary file is
removed (best effort) and the error propagates: `path` is left as it was. A process killed mid-write leaves its
`*.tmp` behind; whoever owns the folder removes those (run_dir.prepare for a run folder and its checkpoints).

`link_atomically(source, path)` gives `source`'s file a second name the same way (a hard link made under a
temporary name, then renamed onto `path`, the folder flushed): no second copy of the bytes, and `path` stays
readable when `source` is deleted. `write_together` writes files that belong together: all of them whole and
flushed under their temporary names before the first is renamed. Stdlib only: any layer may use it."""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path
from typing import Callable, List, Sequence, Tuple

# A folder's fsync is refused by some file systems (and platforms) that cannot flush a directory: the rename is
# then as durable as that file system makes it.
_FOLDER_FSYNC_UNSUPPORTED = (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EACCES, errno.EISDIR)


def temporary_name(path: Path) -> Path:
    """A hidden `.tmp` file beside `path`, unique to this call."""
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")


def fsync_file(path: Path) -> None:
    """The file's data and size on the disk (its bytes survive a crash of the machine)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_folder(folder: Path) -> None:
    """The folder's entries on the disk (a rename into it survives a crash of the machine); nothing where the
    file system or the platform cannot flush a folder."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        if e.errno in _FOLDER_FSYNC_UNSUPPORTED:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in _FOLDER_FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def _discard(tmp: Path) -> None:
    try:
        tmp.unlink(missing_ok=True)
    except OSError:
        pass


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """`write(tmp)` writes the content to the temporary path `tmp`; it is flushed to the disk, renamed onto
    `path`, and the rename flushed."""
    write_together([(Path(path), write)])


def write_together(writes: Sequence[Tuple[Path, Callable[[Path], object]]]) -> None:
    """Several files that belong together (a file and its description): each `write(tmp)` fills its own
    temporary file, in order, and each is flushed; only once all are whole are they renamed onto their paths,
    in order, then their folders flushed. A failure before the renames removes every temporary file and leaves
    every path as it was; the renames follow one another at once, so the files disagree only while a crash
    lands between two of them."""
    staged: List[Tuple[Path, Path]] = []  # (temporary file, path) of each file not renamed yet
    try:
        for path, write in writes:
            staged.append((temporary_name(Path(path)), Path(path)))
            write(staged[-1][0])
            fsync_file(staged[-1][0])
        folders = list(dict.fromkeys(path.parent for _, path in staged))
        while staged:
            os.replace(*staged[0])
            staged.pop(0)
    except BaseException:
        for tmp, _ in staged:
            _discard(tmp)
        raise
    for folder in folders:
        fsync_folder(folder)


def link_atomically(source: Path, path: Path) -> None:
    """`path` becomes a hard link to `source` (one file, two names; the same folder's file system),
    replacing what `path` named atomically. OSError where the file system has no hard links (or
    `source` is on another one): `path` is then left as it was."""
    write_atomically(Path(path), lambda tmp: os.link(source, tmp))
