"""Several agents of ours in one deathmatch game (host + joins on loopback).

The multi-agent protocol: `num_agents`; per-agent `observation_space` / `action_space`;
`reset(seed=None) -> (obs_list, info_list)`; `step(actions) -> (obs_list, reward_list,
terminated_list, truncated_list, info_list)`. A Doom episode (a match) ends for all
players at once; the env then starts the next match itself and returns its first
observations, while that step's infos carry the finished episode's stats. Every info has
`is_active` (always True here: dead players respawn at once).

Start-up of a network game is flaky: players that are not all running within
`connect_timeout_sec` are killed and the game is started again on fresh ports, up to
`connect_attempts` times. A game that stops answering for `step_timeout_sec` is
restarted the same way; that step is then reported as truncated for every agent.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Optional

from sf_hydra.envs.doom.network import free_udp_port, host_args, join_args
from sf_hydra.envs.doom.players import PlayerFailed, PlayerProcess, PlayerTimeout

log = logging.getLogger(__name__)


class DoomMultiAgentEnv:
    def __init__(self, num_agents: int, env_kwargs: Dict[str, Any], host_rules: str = "", bots: int = 0,
                 seed: Optional[int] = None, connect_timeout_sec: float = 30.0, connect_attempts: int = 3,
                 step_timeout_sec: float = 60.0):
        if num_agents < 2:
            raise ValueError(f"a multi-agent Doom game needs num_agents >= 2, got {num_agents}")
        self.num_agents = num_agents
        self.env_kwargs = dict(env_kwargs)
        self.frameskip = int(self.env_kwargs.get("frameskip", 4))
        self.host_rules, self.bots, self.seed = host_rules, bots, seed
        self.connect_timeout_sec, self.connect_attempts = connect_timeout_sec, connect_attempts
        self.step_timeout_sec = step_timeout_sec
        self.players: List[PlayerProcess] = []
        self.restarts = 0  # games restarted after a timeout or a crash (start-up retries excluded)
        self._start()

    # -- the protocol --------------------------------------------------------------------

    def reset(self, seed: Optional[int] = None):
        """`seed` is ignored: players are seeded once at start-up (seed + index); reseeding
        engines in the middle of a network game is not safe."""
        try:
            return self._reset_all()
        except (PlayerTimeout, PlayerFailed) as e:
            self._restart(e)
            return self._reset_all()

    def step(self, actions):
        if len(actions) != self.num_agents:
            raise ValueError(f"step() takes one action per agent ({self.num_agents}), got {len(actions)}")
        try:
            for t in range(self.frameskip):  # players advance tic by tic together (see DoomEnv.tic)
                last = t == self.frameskip - 1
                results = self._ask_all([("tic", a if t == 0 else None, last) for a in actions], "step")
        except (PlayerTimeout, PlayerFailed) as e:
            self._restart(e)
            obs, infos = self._reset_all()
            for info in infos:
                info["restarted"] = True
            n = self.num_agents
            return obs, [0.0] * n, [False] * n, [True] * n, infos
        obs, rewards, terminated, truncated, infos = (list(x) for x in zip(*results))
        for info in infos:
            info["is_active"] = True
        if any(terminated) or any(truncated):
            # The match is over for everyone: those that did not see its end are cut off.
            truncated = [tr or not te for te, tr in zip(terminated, truncated)]
            obs, _ = self.reset()
        return obs, rewards, terminated, truncated, infos

    def close(self) -> None:
        for p in self.players:
            p.close()
        self.players = []

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- internals -----------------------------------------------------------------------

    def _reset_all(self):
        results = self._ask_all([("reset", None)] * self.num_agents, "reset")
        obs = [r[0] for r in results]
        infos = [dict(r[1], is_active=True) for r in results]
        return obs, infos

    def _ask_all(self, messages, what: str):
        """Send every player its message, then collect the answers (they need each other)."""
        for p, msg in zip(self.players, messages):
            p.send(msg)
        deadline = time.monotonic() + self.step_timeout_sec
        return [p.recv(deadline - time.monotonic(), what) for p in self.players]

    def _player_kwargs(self, index: int, ports: List[int]) -> Dict[str, Any]:
        kwargs = dict(self.env_kwargs)
        if index == 0:
            kwargs["network_args"] = host_args(self.num_agents, ports[0], self.host_rules, self.connect_timeout_sec)
            kwargs["bots"] = self.bots
        else:
            kwargs["network_args"] = join_args(ports[0], ports[index], self.connect_timeout_sec, f"P{index}", index)
            kwargs["bots"] = 0
        kwargs["seed"] = None if self.seed is None else self.seed + index
        return kwargs

    def _start(self) -> None:
        """Start all players on fresh ports; retry a set-up that does not come up in time."""
        problems = []
        for attempt in range(1, self.connect_attempts + 1):
            ports = [free_udp_port() for _ in range(self.num_agents)]
            self.players = [PlayerProcess(i) for i in range(self.num_agents)]
            try:
                for i, p in enumerate(self.players):
                    p.send(("init", self._player_kwargs(i, ports)))
                deadline = time.monotonic() + self.connect_timeout_sec
                spaces = [p.recv(deadline - time.monotonic(), "start-up (host/join)") for p in self.players]
                self.observation_space, self.action_space = spaces[0]
                return
            except (PlayerTimeout, PlayerFailed) as e:
                problems.append(f"attempt {attempt} (ports {ports}): {e}")
                log.warning("Multiplayer ViZDoom start-up failed, retrying on fresh ports: %s", e)
                for p in self.players:
                    p.kill()
                self.players = []
        scenario = self.env_kwargs.get("scenario")
        raise RuntimeError(
            f"could not start a {self.num_agents}-player ViZDoom game of env.id={scenario!r} "
            f"in {self.connect_attempts} "
            f"attempts (env.connect_attempts) of {self.connect_timeout_sec:.0f} s (env.connect_timeout_sec):\n"
            + "\n".join(problems)
        )

    def _restart(self, problem: Exception) -> None:
        log.warning("Multiplayer ViZDoom game stopped answering, restarting it: %s", problem)
        for p in self.players:
            p.kill()
        self.players = []
        self.restarts += 1
        self._start()
