"""The two arenas of the paper's battle tasks, generated from a seed.

- `open_arena`: one big sector (~1856 x 1856 units) with many solid obstacle blocks
  (pillars and wall pieces), at least two cells apart so the floor stays connected.
- `room_maze`: a grid of rooms (one sector each, own floor, light and wall texture) whose
  shared walls get doorways along a random spanning tree plus a few extra openings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

import numpy as np

from sf_hydra.envs.doom.maps.grid import Grid, separate_diagonal_blocks
from sf_hydra.envs.doom.maps.udmf import SectorStyle

WALL_TEXTURES = [
    "BRICK7", "STARTAN3", "BROWN1", "CEMENT1", "TEKWALL4", "WOOD1", "METAL1", "GRAY4", "STONE3", "BIGBRIK1",
]
FLOORS = ["FLOOR4_8", "FLOOR0_1", "FLAT5_4", "FLOOR5_1", "FLAT1", "FLOOR1_1", "FLAT14", "GRASS1"]
CEILINGS = ["CEIL3_5", "CEIL1_1", "FLAT1", "CEIL5_1", "CEIL3_1"]


@dataclass
class Layout:
    grid: Grid
    styles: List[SectorStyle]


def open_arena(seed: int, cells: int = 58, cell: int = 32, obstacles: int = 90) -> Layout:
    rng = np.random.default_rng(seed)
    grid = Grid.empty(cells, cells, cell)
    grid.block_textures = ["STONE3"] + [WALL_TEXTURES[i % len(WALL_TEXTURES)] for i in range(obstacles)]
    placed, attempts = 0, 0
    while placed < obstacles and attempts < 5000:
        attempts += 1
        shape = rng.integers(3)
        if shape == 0:  # pillar
            w, h = rng.integers(2, 4, size=2)
        elif shape == 1:  # wall piece along x
            w, h = rng.integers(4, 11), rng.integers(1, 3)
        else:  # wall piece along y
            w, h = rng.integers(1, 3), rng.integers(4, 11)
        col, row = rng.integers(2, cells - 2 - w + 1), rng.integers(2, cells - 2 - h + 1)
        # Keep two free cells between blocks: the floor stays one connected region.
        if (grid.solid[row - 2 : row + h + 2, col - 2 : col + w + 2] != 0).any():
            continue
        grid.fill(int(col), int(row), int(w), int(h), kind=2 + placed)
        placed += 1
    separate_diagonal_blocks(grid)
    return Layout(grid, [SectorStyle(floor="FLOOR4_8", ceiling="CEIL3_5", light=176, height=128)])


def room_maze(seed: int, rooms: int = 4, room_cells: int = 10, cell: int = 32, door_cells: int = 3,
              extra_door_chance: float = 0.25, pillar_chance: float = 0.4) -> Layout:
    rng = np.random.default_rng(seed)
    pitch = room_cells + 1  # a room and the wall after it
    size = rooms * pitch + 1
    grid = Grid.empty(size, size, cell)
    grid.fill(0, 0, size, size, kind=1)
    grid.block_textures = ["STONE3", "STONE3"]
    styles = []
    for ry in range(rooms):
        for rx in range(rooms):
            index = ry * rooms + rx
            grid.carve(1 + rx * pitch, 1 + ry * pitch, room_cells, room_cells, sector=index)
            styles.append(SectorStyle(
                floor=str(rng.choice(FLOORS)), ceiling=str(rng.choice(CEILINGS)),
                light=int(rng.choice([144, 160, 176, 192, 208])),
                height=int(rng.choice([128, 160])), wall=str(rng.choice(WALL_TEXTURES)),
            ))
            if rng.random() < pillar_chance:
                mid = room_cells // 2 - 1
                grid.fill(1 + rx * pitch + mid, 1 + ry * pitch + mid, 2, 2, kind=2)
    for (a, b) in _maze_doors(rng, rooms, extra_door_chance):
        _carve_door(grid, rng, a, b, rooms, room_cells, door_cells)
    separate_diagonal_blocks(grid)
    return Layout(grid, styles)


def _maze_doors(rng, rooms: int, extra_chance: float):
    """Pairs of adjacent rooms to connect: a random spanning tree (depth-first) + extras."""
    n = rooms * rooms

    def neighbours(i):
        x, y = i % rooms, i // rooms
        out = [(x + dx, y + dy) for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))]
        return [yy * rooms + xx for xx, yy in out if 0 <= xx < rooms and 0 <= yy < rooms]

    seen, stack, doors = {0}, [0], set()
    while stack:
        options = [j for j in neighbours(stack[-1]) if j not in seen]
        if not options:
            stack.pop()
            continue
        j = int(rng.choice(options))
        doors.add((min(stack[-1], j), max(stack[-1], j)))
        seen.add(j)
        stack.append(j)
    for i in range(n):
        for j in neighbours(i):
            if i < j and (i, j) not in doors and rng.random() < extra_chance:
                doors.add((i, j))
    return sorted(doors)


def _carve_door(grid: Grid, rng, a: int, b: int, rooms: int, room_cells: int, door_cells: int) -> None:
    """Open the wall between rooms a < b; the doorway belongs to room a's sector."""
    pitch = room_cells + 1
    ax, ay = a % rooms, a // rooms
    offset = int(rng.integers(1, room_cells - door_cells))  # not flush with a corner
    if b == a + 1:  # b east of a: the wall is the column after a
        grid.carve((ax + 1) * pitch, 1 + ay * pitch + offset, 1, door_cells, sector=a)
    else:  # b north of a
        grid.carve(1 + ax * pitch + offset, (ay + 1) * pitch, door_cells, 1, sector=a)
