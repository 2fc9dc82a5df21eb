"""A player process (agent_process.py) seen from the parent: start, talk with timeouts, kill.

Started with subprocess (rollout workers are daemonic processes, which multiprocessing
forbids to have children) in a new session: killing its process group also kills the
ViZDoom engine it started, which would otherwise outlive it. Its output (the engine's
network chatter) goes to a temporary log whose tail is quoted in error messages.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path

import sf_hydra.envs


class PlayerTimeout(RuntimeError):
    pass


class PlayerFailed(RuntimeError):
    pass


def _child_env() -> dict:
    """The child imports sf_hydra from wherever the parent did."""
    env = dict(os.environ)
    src = str(Path(sf_hydra.__file__).resolve().parents[1])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class PlayerProcess:
    def __init__(self, index: int):
        self.index = index
        parent_sock, child_sock = socket.socketpair()
        self.log = tempfile.NamedTemporaryFile(prefix=f"sf_hydra_doom_player{index}_", suffix=".log", delete=False)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sf_hydra.envs.doom.agent_process", str(child_sock.fileno())],
                pass_fds=[child_sock.fileno()], start_new_session=True, stdin=subprocess.DEVNULL,
                stdout=self.log, stderr=subprocess.STDOUT, env=_child_env(),
            )
        finally:
            child_sock.close()
        self.conn = Connection(parent_sock.detach())
        self._dead = False

    def send(self, msg) -> None:
        try:
            self.conn.send(msg)
        except OSError as e:
            raise PlayerFailed(self._describe(f"could not send {msg[0]!r}: {e}")) from e

    def recv(self, timeout_sec: float, what: str):
        """The payload of the next reply; PlayerTimeout / PlayerFailed with the log's tail."""
        try:
            ready = self.conn.poll(max(0.0, timeout_sec))
        except OSError:
            ready = True  # closed: recv raises below
        if not ready:
            raise PlayerTimeout(self._describe(f"no answer to {what} within {timeout_sec:.0f} s"))
        try:
            reply = self.conn.recv()
        except (EOFError, OSError) as e:
            raise PlayerFailed(self._describe(f"exited during {what} (exit code {self.proc.poll()})")) from e
        if reply[0] == "error":
            raise PlayerFailed(self._describe(f"failed during {what}:\n{reply[1]}"))
        return reply[1:] if len(reply) > 2 else reply[1]

    def close(self, grace_sec: float = 5.0) -> None:
        """Ask the player to close its game; kill it if it does not exit in time."""
        if self._dead:
            return
        try:
            self.conn.send(("close",))
            self.proc.wait(timeout=grace_sec)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def kill(self) -> None:
        """Kill the player and its engine (same process group); idempotent."""
        if self._dead:
            return
        self._dead = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.conn.close()
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass

    def _describe(self, problem: str) -> str:
        self.log.flush()
        try:
            tail = Path(self.log.name).read_bytes()[-1500:].decode(errors="replace")
        except OSError:
            tail = ""
        tail = " | ".join(line.strip() for line in tail.replace("\r", "\n").splitlines() if line.strip())[-800:]
        return (f"ViZDoom player {self.index} (pid {self.proc.pid}) {problem}"
                + (f"\n  engine output: {tail}" if tail else ""))
