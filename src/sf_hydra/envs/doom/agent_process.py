"""One player of a multiplayer game, in its own process: `python -m sf_hydra.envs.doom.agent_process FD`.

Why a process per player: two players' games in threads of one process deadlocked on
their first steps here (vizdoom 1.3.2), and a process can be killed with its engine when
it hangs. The parent talks to us over the socket FD with pickled messages:

    parent -> ("init", DoomEnv kwargs)   child -> ("ready", observation_space, action_space)
    parent -> ("reset", seed)            child -> ("ok", (obs, info))
    parent -> ("tic", action|None, last) child -> ("ok", None), or on a step's last tic
                                                  ("ok", (obs, reward, terminated, truncated, info))
    parent -> ("close",)                 child exits
    any failure                          child -> ("error", traceback text), then exits

The process leads its own session (the parent starts it so), so the parent can kill it
and its ViZDoom engine process together with one killpg.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection

WATCH_PERIOD_SEC = 1.0


def watch_parent() -> None:
    """Kill our process group (us and the engine) once the parent is gone. A thread can
    do this: ViZDoom releases the GIL while it waits for the other players."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(WATCH_PERIOD_SEC)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def serve(conn: Connection) -> None:
    env = None
    try:
        while True:
            try:
                msg = conn.recv()
            except EOFError:  # the parent is gone
                return
            cmd = msg[0]
            if cmd == "init":
                from sf_hydra.envs.doom.env import DoomEnv  # in the try: a failed import reaches the parent

                env = DoomEnv(**msg[1])
                conn.send(("ready", env.observation_space, env.action_space))
            elif cmd == "reset":
                conn.send(("ok", env.reset(seed=msg[1])))
            elif cmd == "tic":
                conn.send(("ok", env.tic(msg[1], msg[2])))
            elif cmd == "close":
                return
            else:
                raise ValueError(f"unknown command {cmd!r}")
    except Exception:
        try:
            conn.send(("error", traceback.format_exc()))
        except OSError:
            pass
    finally:
        if env is not None:
            env.close()


if __name__ == "__main__":
    watch_parent()
    serve(Connection(int(sys.argv[1])))
