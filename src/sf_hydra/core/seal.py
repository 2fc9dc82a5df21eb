"""Seals: what this user's own sf_hydra wrote, told apart from what came from elsewhere.

A run folder can arrive from anywhere (a pull, an import, a zip, a shared disk), so nothing inside it can prove
who wrote it: a secret kept in the folder would travel with a hostile folder too. The secret is the user's, kept
outside every run folder (`key_path()`: `$SF_HYDRA_HOME/seal.key`, by default `~/.config/sf_hydra/seal.key`,
mode 0600, made on first use). `seal(purpose, payload)` is an HMAC-SHA256 of the payload under that key, bound to
a purpose (a snapshot's seal never passes as a trust record's); `verify` compares in constant time. Whatever
carries a seal that verifies was written by this user's sf_hydra, on a machine that shares their home folder (a
cluster's nodes do); anything else is data from elsewhere.

Where the key cannot be made (a read-only home), `seal` returns None and `verify` is False: such files are
treated as from elsewhere (safe, and said once by the callers). Stdlib only: any layer may use it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Optional

HOME_ENV = "SF_HYDRA_HOME"
KEY_FILE = "seal.key"
KEY_BYTES = 32


def key_path() -> Path:
    """Where the user's key lives: $SF_HYDRA_HOME, else $XDG_CONFIG_HOME/sf_hydra, else ~/.config/sf_hydra."""
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home).expanduser() / KEY_FILE
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "sf_hydra" / KEY_FILE


def _make_key(path: Path) -> None:
    """A fresh random key at `path`, readable by the user alone; a key another process made first wins."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, secrets.token_bytes(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if another process made the key first: theirs is kept
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def user_key() -> Optional[bytes]:
    """The user's key (made on first use), or None where it can neither be read nor made."""
    path = key_path()
    try:
        if not path.is_file():
            _make_key(path)
        key = path.read_bytes()
    except OSError:
        return None
    return key if len(key) >= KEY_BYTES else None


def seal(purpose: str, payload: bytes) -> Optional[str]:
    """The hex HMAC of `payload` for `purpose` under the user's key; None without a key."""
    key = user_key()
    if key is None:
        return None
    return hmac.new(key, purpose.encode() + b"\0" + payload, hashlib.sha256).hexdigest()


def verify(purpose: str, payload: bytes, mac: object) -> bool:
    """Whether `mac` is this user's seal of `payload` for `purpose`."""
    expected = seal(purpose, payload)
    return expected is not None and isinstance(mac, str) and hmac.compare_digest(expected, mac)
