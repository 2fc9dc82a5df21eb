"""Doom network games on loopback, with real engines and real processes: one agent against
built-in bots, several agents of ours in one game (the multi-agent protocol), restarts
after a dead player, retries after a failed start-up, and no process left behind."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

vzd = pytest.importorskip("vizdoom", reason="the doom env family needs the vizdoom package")

from sf_hydra.envs import make_env  # noqa: E402
from sf_hydra.envs.doom.env import DoomEnv  # noqa: E402
from sf_hydra.envs.doom.multiagent import DoomMultiAgentEnv  # noqa: E402
from tests.conftest import REPO_ROOT, compose_cfg  # noqa: E402


def env_node(name, **overrides):
    cfg = compose_cfg(f"env=doom/{name}").env
    for key, value in overrides.items():
        cfg[key] = value
    return cfg


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead too
        return f.read().split(")")[-1].split()[0] != "Z"


def wait_dead(pids, timeout=15.0) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if alive(p)]


def test_one_agent_against_bots():
    env = make_env(env_node("duel_bots", episode_timeout=400), seed=0)
    try:
        assert isinstance(env, DoomEnv) and env.multiplayer and env.bots == 1
        env.reset(seed=0)
        env.action_space.seed(0)
        env.step(env.action_space.sample())  # bots enter on the first tic
        assert env.game.get_game_variable(vzd.GameVariable.PLAYER_COUNT) == 2  # us and the bot
        for step in range(1, 200):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert env.observation_space.contains(obs)
            if terminated or truncated:
                break
        assert truncated and not terminated and step == 400 // 4 - 1  # only the time limit ends it
        assert set(info["episode_extra_stats"]) == {"FRAGCOUNT", "DEATHCOUNT", "HITCOUNT"}
        env.reset()  # the next match has its bot again
        env.step(env.action_space.sample())
        assert env.game.get_game_variable(vzd.GameVariable.PLAYER_COUNT) == 2
    finally:
        env.close()


@pytest.fixture
def duel():
    env = make_env(env_node("duel", episode_timeout=210), seed=0)
    yield env
    env.close()


def test_duel_follows_the_multi_agent_protocol(duel):
    assert isinstance(duel, DoomMultiAgentEnv) and duel.num_agents == 2
    obs, infos = duel.reset()
    assert len(obs) == len(infos) == 2 and all(duel.observation_space.contains(o) for o in obs)
    assert all(info["is_active"] for info in infos)
    duel.action_space.seed(0)
    ends = []
    for step in range(120):
        obs, rewards, terminated, truncated, infos = duel.step([duel.action_space.sample() for _ in range(2)])
        assert len(obs) == len(rewards) == len(terminated) == len(truncated) == len(infos) == 2
        assert all(duel.observation_space.contains(o) for o in obs) and all(np.isfinite(rewards))
        assert all(info["is_active"] for info in infos)
        done = [te or tr for te, tr in zip(terminated, truncated)]
        assert done[0] == done[1]  # one match, one end
        if done[0]:
            ends.append(step)
            assert all("FRAGCOUNT" in info["episode_extra_stats"] for info in infos)
    # 210 tics of +timelimit = 52.5 steps of 4 tics: the engine ends the match at the same tic
    # for both, and the step that reports the end already started the next match.
    assert ends == [52, 105], ends
    assert duel.restarts == 0


@pytest.mark.slow
def test_a_dead_player_process_restarts_the_game(duel):
    duel.reset()
    victim = duel.players[1].proc.pid
    os.killpg(victim, signal.SIGKILL)
    obs, rewards, terminated, truncated, infos = duel.step([duel.action_space.sample() for _ in range(2)])
    assert truncated == [True, True] and all(info.get("restarted") for info in infos)
    assert duel.restarts == 1 and victim not in [p.proc.pid for p in duel.players]
    assert all(duel.observation_space.contains(o) for o in obs)
    for _ in range(5):
        duel.step([duel.action_space.sample() for _ in range(2)])


def our_players() -> list:
    """Player processes started by this process that still run."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().split(")")[-1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if ppid == os.getpid() and b"sf_hydra.envs.doom.agent_process" in cmdline and alive(int(entry)):
            pids.append(int(entry))
    return pids


@pytest.mark.slow
def test_slow_start_up_is_retried_then_reported_without_leftovers():
    """Players that are not all up in time are killed and started again on fresh ports;
    after the last attempt the error says what happened each time."""
    with pytest.raises(RuntimeError) as err:
        DoomMultiAgentEnv(2, {"scenario": "multi_duel"}, connect_timeout_sec=1.0, connect_attempts=2)
    message = str(err.value)
    assert "in 2 attempts (env.connect_attempts) of 1 s (env.connect_timeout_sec)" in message
    assert "attempt 1 (ports" in message and "attempt 2 (ports" in message and "no answer to start-up" in message
    assert wait_dead(our_players()) == []


def test_a_player_that_fails_is_reported_with_its_traceback():
    with pytest.raises(RuntimeError) as err:
        DoomMultiAgentEnv(2, {"scenario": "no_such_scenario.cfg"}, connect_timeout_sec=30, connect_attempts=1)
    assert "env.id='no_such_scenario.cfg'" in str(err.value) and "failed during start-up" in str(err.value)
    assert wait_dead(our_players()) == []


@pytest.mark.slow
def test_close_leaves_no_process(duel):
    pids = [p.proc.pid for p in duel.players]
    duel.reset()
    duel.close()
    assert wait_dead(pids) == []


@pytest.mark.slow
def test_players_exit_when_their_parent_dies(tmp_path):
    """A killed rollout worker must not leave players and engines behind: they watch it."""
    code = (
        "import sys, time\n"
        "from sf_hydra.envs.doom.multiagent import DoomMultiAgentEnv\n"
        "env = DoomMultiAgentEnv(2, {'scenario': 'multi_duel'}, connect_timeout_sec=20)\n"
        "print(' '.join(str(p.proc.pid) for p in env.players), flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(p) for p in pids)
        parent.kill()
        parent.wait(timeout=10)
        assert wait_dead(pids) == []
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_death_is_penalized_once_however_long_the_player_stays_dead():
    """duel_bots' delta rewards: -0.75 per death (+ -1.5 for a suicide's lost frag), once;
    nothing for the steps spent dead (2 s respawn delay) nor for the health a respawn restores."""
    env = make_env(env_node("duel_bots", episode_timeout=4200), seed=0)
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        deaths = frags = 0
        dead_steps = 0
        for _ in range(400):
            before = [env.game.get_game_variable(v) for v in (vzd.GameVariable.DEATHCOUNT, vzd.GameVariable.FRAGCOUNT)]
            _, reward, _, _, _ = env.step(env.action_space.sample())
            died = env.game.get_game_variable(vzd.GameVariable.DEATHCOUNT) - before[0]
            lost = min(0.0, env.game.get_game_variable(vzd.GameVariable.FRAGCOUNT) - before[1])
            if died:
                deaths += died
                frags += lost
                assert reward == pytest.approx(-0.75 * died + 1.5 * lost, abs=0.35)  # + hits/damage terms
            else:
                assert reward > -0.35  # no death penalty while dead, no reward for the respawn's health
            dead_steps += env.game.is_player_dead()
        assert deaths >= 1 and dead_steps > deaths  # the player stayed dead for several steps
    finally:
        env.close()
