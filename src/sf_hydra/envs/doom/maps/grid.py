"""A map as a grid of square cells: each cell is solid (a wall or obstacle block) or free
floor belonging to one sector. Walls are drawn later along the borders between cells.

Why a grid: every wall is then axis-aligned and every free area is a union of cells, so
the builder knows exactly where an actor fits (the free spots for warping things).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Tuple

import numpy as np

FREE = 0  # `solid` value of a free cell; solid cells hold a block id >= 1 (its wall texture)


@dataclass
class Grid:
    """`solid[row, col]`: 0 = free, k >= 1 = a solid cell of block kind k.
    `sector[row, col]`: sector index of a free cell, -1 for solid cells.
    Column c spans x in [c * cell, (c + 1) * cell) map units, row r spans y likewise."""

    solid: np.ndarray
    sector: np.ndarray
    cell: int = 32
    block_textures: List[str] = field(default_factory=list)  # texture of block kind k at k - 1

    @classmethod
    def empty(cls, cols: int, rows: int, cell: int = 32) -> "Grid":
        return cls(np.zeros((rows, cols), np.int16), np.zeros((rows, cols), np.int16), cell)

    @property
    def rows(self) -> int:
        return self.solid.shape[0]

    @property
    def cols(self) -> int:
        return self.solid.shape[1]

    def fill(self, col: int, row: int, width: int, height: int, kind: int) -> None:
        """Make a rectangle of cells solid with block kind `kind` (>= 1)."""
        self.solid[row : row + height, col : col + width] = kind
        self.sector[row : row + height, col : col + width] = -1

    def carve(self, col: int, row: int, width: int, height: int, sector: int) -> None:
        """Make a rectangle of cells free floor of `sector`."""
        self.solid[row : row + height, col : col + width] = FREE
        self.sector[row : row + height, col : col + width] = sector

    def free(self) -> np.ndarray:
        return self.solid == FREE

    def cell_center(self, col: float, row: float) -> Tuple[float, float]:
        return ((col + 0.5) * self.cell, (row + 0.5) * self.cell)


def separate_diagonal_blocks(grid: Grid) -> int:
    """Fill the free cell of every 2x2 window whose solid cells touch only at a corner.

    Such a corner would be a vertex shared by four one-sided walls; engines handle it
    badly (actors slip through). Returns how many cells were filled.
    """
    filled = 0
    changed = True
    while changed:
        changed = False
        s = grid.solid != FREE
        a, b, c, d = s[:-1, :-1], s[:-1, 1:], s[1:, :-1], s[1:, 1:]
        bad = (a & d & ~b & ~c) | (b & c & ~a & ~d)
        for r, col in zip(*np.nonzero(bad)):
            # Fill the lower-left free cell of the window with its solid neighbour's kind.
            if not s[r, col]:
                target, kind = (r, col), grid.solid[r, col + 1] or grid.solid[r + 1, col]
            else:
                target, kind = (r, col + 1), grid.solid[r, col]
            grid.fill(target[1], target[0], 1, 1, int(kind))
            filled += 1
            changed = True
            break
    return filled


def clear_cells(grid: Grid) -> np.ndarray:
    """Free cells whose 8 neighbours are free too: anywhere inside such a cell an actor of
    radius <= one cell fits without touching a wall."""
    free = np.pad(grid.free(), 1, constant_values=False)
    clear = np.ones_like(grid.free())
    rows, cols = grid.rows, grid.cols
    for dr in (0, 1, 2):
        for dc in (0, 1, 2):
            clear &= free[dr : dr + rows, dc : dc + cols]
    return clear


@dataclass(frozen=True)
class SpotArea:
    """A rectangle of map units where an actor's center may be put: [x0, x1] x [y0, y1]."""

    x0: int
    y0: int
    x1: int
    y1: int
    cells: int  # how many grid cells it covers (its weight when picking spots)


def spot_areas(grid: Grid, max_side: int = 4) -> List[SpotArea]:
    """Cover the clear cells with rectangles of at most max_side x max_side cells.

    A rectangle spans the centers of its first and last cells, so every point in it is
    inside a clear cell.
    """
    todo = clear_cells(grid)
    areas = []
    for r in range(grid.rows):
        for c in range(grid.cols):
            if not todo[r, c]:
                continue
            width = 1
            while width < max_side and c + width < grid.cols and todo[r, c + width]:
                width += 1
            height = 1
            while height < max_side and r + height < grid.rows and todo[r + height, c : c + width].all():
                height += 1
            todo[r : r + height, c : c + width] = False
            x0, y0 = grid.cell_center(c, r)
            x1, y1 = grid.cell_center(c + width - 1, r + height - 1)
            areas.append(SpotArea(int(x0), int(y0), int(x1), int(y1), width * height))
    return areas


def allot_slots(weights: List[int], slots: int) -> List[int]:
    """Split `slots` among items in proportion to `weights` (largest remainder); returns,
    per slot, the index of its item. Items too light for a slot get none."""
    total = float(sum(weights))
    if total <= 0:
        raise ValueError("no free area to put actors in")
    exact = [w * slots / total for w in weights]
    counts = [int(e) for e in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: (counts[i] - exact[i], i))
    for i in by_remainder[: slots - sum(counts)]:
        counts[i] += 1
    return [i for i, n in enumerate(counts) for _ in range(n)]


def is_connected(grid: Grid) -> bool:
    """Whether every free cell can be walked to from every other (4-neighbourhood)."""
    free = grid.free()
    cells = np.argwhere(free)
    if len(cells) == 0:
        return False
    seen = np.zeros_like(free)
    stack = [tuple(cells[0])]
    seen[stack[0]] = True
    while stack:
        r, c = stack.pop()
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < grid.rows and 0 <= nc < grid.cols and free[nr, nc] and not seen[nr, nc]:
                seen[nr, nc] = True
                stack.append((nr, nc))
    return bool(seen[free].all())
