"""Engine arguments that host or join a deathmatch game on the loopback interface.

Every player binds its own UDP port, taken fresh from the OS (bind to port 0), so games
running side by side in one machine never share one. A port can still be taken by
someone else between our probe and the engine's bind: callers retry on fresh ports.
"""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def host_args(players: int, port: int, rules: str, connect_timeout_sec: float, name: str = "P0") -> str:
    """The hosting player: waits for `players - 1` others to join (bots do not count)."""
    return (f"-host {players} -port {port} -deathmatch +viz_connect_timeout {max(1, int(connect_timeout_sec))} "
            f"+name {name} +colorset 0 {rules}").strip()


def join_args(host_port: int, own_port: int, connect_timeout_sec: float, name: str, color: int) -> str:
    return (f"-join {LOOPBACK}:{host_port} -port {own_port} +viz_connect_timeout {max(1, int(connect_timeout_sec))} "
            f"+name {name} +colorset {color % 8}")
