"""Our battle map builder: grid geometry, UDMF walls, the WAD container, the build cache,
and the built maps in the real engine (they load, the player can die, kills pay, imps
respawn)."""

import numpy as np
import pytest

vzd = pytest.importorskip("vizdoom", reason="the doom env family needs the vizdoom package")

from sf_hydra.envs.doom.env import DoomEnv  # noqa: E402
from sf_hydra.envs.doom.maps import decorate  # noqa: E402
from sf_hydra.envs.doom.maps.build import BATTLE_SPECS, build_layout, build_scenario, wad_bytes  # noqa: E402
from sf_hydra.envs.doom.maps.grid import (  # noqa: E402
    FREE,
    Grid,
    allot_slots,
    clear_cells,
    is_connected,
    separate_diagonal_blocks,
    spot_areas,
)
from sf_hydra.envs.doom.maps.udmf import cell_edges, merge_collinear  # noqa: E402
from sf_hydra.envs.doom.maps.wad import map_lumps, read_wad, write_wad  # noqa: E402

BATTLE_ACTIONS = {"groups": [["MOVE_FORWARD", "MOVE_BACKWARD"], ["MOVE_RIGHT", "MOVE_LEFT"], ["ATTACK"], ["SPEED"]],
                  "turn_delta_bins": 11, "turn_delta_max": 10.0}


# -- geometry ---------------------------------------------------------------------------


def test_wad_round_trip_and_lump_names():
    lumps = map_lumps("MAP01", 'namespace = "zdoom";\n') + [("DECORATE", b"actor A {}\n")]
    data = write_wad(lumps)
    assert data[:4] == b"PWAD"
    assert read_wad(data) == [("MAP01", b""), ("TEXTMAP", b'namespace = "zdoom";\n'), ("ENDMAP", b""),
                              ("DECORATE", b"actor A {}\n")]
    with pytest.raises(ValueError, match="1 to 8 ASCII"):
        write_wad([("TOOLONGNAME", b"")])


@pytest.mark.parametrize("name", sorted(BATTLE_SPECS))
def test_layouts_are_connected_and_spots_are_clear(name):
    grid = build_layout(BATTLE_SPECS[name]).grid
    assert is_connected(grid)
    clear = clear_cells(grid)
    areas = spot_areas(grid)
    assert sum(a.cells for a in areas) == int(clear.sum())  # the areas cover every clear cell once
    for a in areas:
        for x, y in ((a.x0, a.y0), (a.x1, a.y1), (a.x0, a.y1), (a.x1, a.y0)):
            assert clear[int(y // grid.cell), int(x // grid.cell)]


def test_battle_is_one_big_sector_with_many_obstacles():
    layout = build_layout(BATTLE_SPECS["battle"])
    grid = layout.grid
    assert grid.cols * grid.cell == 1856 and grid.rows * grid.cell == 1856
    assert len(layout.styles) == 1 and (grid.sector[grid.free()] == 0).all()
    assert len(np.unique(grid.solid[grid.solid != FREE])) >= 20  # obstacle blocks


def test_battle2_is_a_maze_of_rooms():
    layout = build_layout(BATTLE_SPECS["battle2"])
    assert len(layout.styles) == 16  # one sector per room
    assert len({s.wall for s in layout.styles}) > 1 and len({s.floor for s in layout.styles}) > 1


@pytest.mark.parametrize("name", sorted(BATTLE_SPECS))
def test_walls_face_the_floor(name):
    """Doom draws a one-sided wall from its front (right-hand) side: that must be floor."""
    layout = build_layout(BATTLE_SPECS[name])
    grid = layout.grid
    raw = cell_edges(grid, layout.styles)
    edges = merge_collinear(raw)
    assert len(edges) < len(raw) / 2  # straight runs were merged

    def cell_at(x, y):
        c, r = int(np.floor(x)), int(np.floor(y))
        if not (0 <= c < grid.cols and 0 <= r < grid.rows):
            return None
        return (r, c)

    for e in edges:
        (x1, y1), (x2, y2) = e.v1, e.v2
        dx, dy = np.sign(x2 - x1), np.sign(y2 - y1)
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        right = cell_at(mx + dy * 0.5, my - dx * 0.5)  # the right-hand normal of (dx, dy) is (dy, -dx)
        left = cell_at(mx - dy * 0.5, my + dx * 0.5)
        assert right is not None and grid.solid[right] == FREE and grid.sector[right] == e.front
        if e.back < 0:
            assert left is None or grid.solid[left] != FREE
        else:
            assert grid.solid[left] == FREE and grid.sector[left] == e.back


def test_diagonal_contacts_are_filled():
    grid = Grid.empty(4, 4)
    grid.block_textures = ["STONE3"]
    grid.fill(1, 1, 1, 1, kind=1)
    grid.fill(2, 2, 1, 1, kind=1)  # touches the first block at one corner only
    assert separate_diagonal_blocks(grid) == 1
    s = grid.solid != FREE
    assert not ((s[:-1, :-1] & s[1:, 1:] & ~s[:-1, 1:] & ~s[1:, :-1])
                | (s[:-1, 1:] & s[1:, :-1] & ~s[:-1, :-1] & ~s[1:, 1:])).any()


def test_slots_follow_area():
    slots = allot_slots([1, 3, 0, 4], 256)
    assert len(slots) == 256
    assert [slots.count(i) for i in range(4)] == [32, 96, 0, 128]


def test_relocation_picks_among_256_slots_in_two_jumps():
    areas = spot_areas(build_layout(BATTLE_SPECS["battle"]).grid)
    text = "\n".join(decorate.relocation_states(areas, "Done"))
    jumps = [line for line in text.splitlines() if "A_Jump(256," in line]
    assert len(jumps) == 1 + decorate.SLOT_GROUPS
    assert all(line.count('"') == 2 * decorate.SLOT_GROUPS for line in jumps)  # 16 labels each: uniform
    assert text.count("A_Warp(") == len({int(lbl[1:]) for lbl in _labels(text) if lbl.startswith("A")})


def _labels(text):
    return [line.strip()[:-1] for line in text.splitlines() if line.strip().endswith(":")]


# -- the build cache ---------------------------------------------------------------------


def test_build_is_cached_and_deterministic(tmp_path):
    cfg = build_scenario("battle", root=tmp_path)
    wad = cfg.with_suffix(".wad")
    stamp = wad.stat().st_mtime_ns
    assert build_scenario("battle", root=tmp_path) == cfg and wad.stat().st_mtime_ns == stamp  # reused
    assert wad.read_bytes() == wad_bytes(BATTLE_SPECS["battle"])  # same bytes when built again
    assert "doom_scenario_path = battle.wad" in cfg.read_text() and "kill_reward = 1.0" in cfg.read_text()
    other = build_scenario("battle2", root=tmp_path)
    assert other.parent != cfg.parent and other.parent.parent == cfg.parent.parent
    names = [n for n, _ in read_wad(wad.read_bytes())]
    assert names == ["MAP01", "TEXTMAP", "ENDMAP", "DECORATE", "MAPINFO"]


# -- in the engine -------------------------------------------------------------------------


def battle_env(name="battle", **kwargs):
    return DoomEnv(name, actions=BATTLE_ACTIONS, measurements=["HEALTH", "KILLCOUNT"], episode_stats=["KILLCOUNT"],
                   **kwargs)


@pytest.mark.parametrize("name", sorted(BATTLE_SPECS))
def test_map_loads_with_its_actors(name):
    spec = BATTLE_SPECS[name]
    env = battle_env(name, seed=0, game_settings={"objects_info_enabled": True})
    try:
        grid = build_layout(spec).grid
        clear = clear_cells(grid)
        starts = []
        for seed in (1, 2):
            obs, _ = env.reset(seed=seed)
            assert env.observation_space.contains(obs) and obs["measurements"][0] == 100.0
            env.step((0, 0, 0, 0, 5))  # let every actor warp to its spot
            objects = env.game.get_state().objects
            names = [o.name for o in objects]
            assert names.count(decorate.IMP) == spec.monsters
            assert names.count(decorate.MEDIKIT) == spec.rules.initial_items == names.count(decorate.CLIP)
            player = next(o for o in objects if o.name == decorate.PLAYER)
            assert clear[int(player.position_y // grid.cell), int(player.position_x // grid.cell)]
            starts.append((round(player.position_x), round(player.position_y)))
        assert starts[0] != starts[1]  # warped to a random spot each episode
    finally:
        env.close()


def test_the_player_can_die():
    """Standing still among 15 imps: the episode ends by death, well before the timeout."""
    env = battle_env("battle", seed=0)
    try:
        env.reset(seed=0)
        for step in range(2100 // 4 + 1):
            obs, reward, terminated, truncated, info = env.step((0, 0, 0, 0, 5))
            if terminated or truncated:
                break
        assert terminated and not truncated and env.game.is_player_dead()
        assert step < 2100 // 4 - 1
        assert "KILLCOUNT" in info["episode_extra_stats"]
    finally:
        env.close()


def aim_at_imps(env) -> tuple:
    """A scripted shooter: turn towards the biggest imp on screen, fire when it is centred."""
    state = env.game.get_state()
    imps = [lb for lb in state.labels if lb.object_name == decorate.IMP]
    if not imps:
        return (0, 0, 0, 0, 10)  # no imp in sight: turn right fast
    target = max(imps, key=lambda lb: lb.width * lb.height)
    offset = target.x + target.width / 2 - state.screen_buffer.shape[-1] / 2
    turn = int(np.clip(round(offset / 16), -5, 5)) + 5
    return (0, 0, int(abs(offset) < target.width / 2 + 2), 0, turn)


def test_kills_give_reward_and_imps_respawn():
    """More kills than the map has imps means dead imps came back."""
    spec = BATTLE_SPECS["battle2"]
    env = battle_env("battle2", seed=0, game_settings={"labels_buffer_enabled": True, "doom_skill": 1})
    try:
        kills = []
        for seed in range(4):
            env.reset(seed=seed)
            done = False
            while not done:
                before = env.game.get_game_variable(vzd.GameVariable.KILLCOUNT)
                _, reward, terminated, truncated, info = env.step(aim_at_imps(env))
                done = terminated or truncated
                if not done and env.game.get_game_variable(vzd.GameVariable.KILLCOUNT) > before:
                    assert reward >= 0.9  # the kill reward (1.0), give or take the small health terms
            kills.append(info["episode_extra_stats"]["KILLCOUNT"])
            if kills[-1] > spec.monsters:
                break
        assert max(kills) > spec.monsters, kills
    finally:
        env.close()
