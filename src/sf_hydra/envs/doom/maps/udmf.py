"""Grid -> UDMF TEXTMAP text (namespace "zdoom").

Walls run along cell borders: a border between a free and a solid cell is a one-sided
linedef, a border between free cells of two sectors a two-sided one. Every linedef is
oriented so that its front side (the right side walking from v1 to v2) faces the free
cell, as Doom requires for one-sided lines. Collinear runs are merged into one linedef.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from sf_hydra.envs.doom.maps.grid import FREE, Grid

Corner = Tuple[int, int]  # grid corner (col, row); map position = corner * cell


@dataclass(frozen=True)
class SectorStyle:
    floor: str = "FLOOR0_1"
    ceiling: str = "CEIL1_1"
    light: int = 192
    height: int = 128  # floor at 0, ceiling at `height`
    wall: Optional[str] = None  # texture of the walls around this sector (None: the block's own)


@dataclass(frozen=True)
class Thing:
    x: float
    y: float
    type: int  # editor number (doomednum)
    angle: int = 0


@dataclass(frozen=True)
class Edge:
    v1: Corner
    v2: Corner
    front: int  # sector index
    back: int  # sector index, -1 for a one-sided wall
    texture: str


# Border of a free cell (col, row) towards a neighbour, walked clockwise around the cell
# so that the cell is on the right: (neighbour offset, v1 corner offset, v2 corner offset).
_SIDES = (
    ((0, 1), (0, 1), (1, 1)),  # north: west -> east
    ((1, 0), (1, 1), (1, 0)),  # east: north -> south
    ((0, -1), (1, 0), (0, 0)),  # south: east -> west
    ((-1, 0), (0, 0), (0, 1)),  # west: south -> north
)


def cell_edges(grid: Grid, styles: Sequence[SectorStyle]) -> List[Edge]:
    """One edge per cell border that needs a linedef (not yet merged)."""
    edges = []
    for row in range(grid.rows):
        for col in range(grid.cols):
            if grid.solid[row, col] != FREE:
                continue
            here = int(grid.sector[row, col])
            for (dc, dr), (ac, ar), (bc, br) in _SIDES:
                c, r = col + dc, row + dr
                inside = 0 <= c < grid.cols and 0 <= r < grid.rows
                v1, v2 = (col + ac, row + ar), (col + bc, row + br)
                if not inside or grid.solid[r, c] != FREE:
                    kind = int(grid.solid[r, c]) if inside else 1
                    texture = styles[here].wall or grid.block_textures[kind - 1]
                    edges.append(Edge(v1, v2, here, -1, texture))
                elif grid.sector[r, c] != here and here < grid.sector[r, c]:
                    edges.append(Edge(v1, v2, here, int(grid.sector[r, c]), "-"))
    return edges


def merge_collinear(edges: List[Edge]) -> List[Edge]:
    """Join consecutive edges that continue each other in a straight line with the same
    sides, through corners no other edge touches."""
    degree: Dict[Corner, int] = {}
    for e in edges:
        degree[e.v1] = degree.get(e.v1, 0) + 1
        degree[e.v2] = degree.get(e.v2, 0) + 1
    starting = {e.v1: e for e in edges}
    continues = set()  # edges that extend the previous one
    for e in edges:
        nxt = starting.get(e.v2)
        if nxt is not None and degree[e.v2] == 2 and _same_line(e, nxt):
            continues.add(nxt)
    merged = []
    for e in edges:
        if e in continues:
            continue
        end = e
        while True:
            nxt = starting.get(end.v2) if degree[end.v2] == 2 else None
            if nxt is None or nxt not in continues or nxt is e:
                break
            end = nxt
        merged.append(Edge(e.v1, end.v2, e.front, e.back, e.texture))
    return merged


def _same_line(a: Edge, b: Edge) -> bool:
    da = (a.v2[0] - a.v1[0], a.v2[1] - a.v1[1])
    db = (b.v2[0] - b.v1[0], b.v2[1] - b.v1[1])
    return da == db and (a.front, a.back, a.texture) == (b.front, b.back, b.texture)


def textmap(grid: Grid, styles: Sequence[SectorStyle], things: Sequence[Thing]) -> str:
    edges = merge_collinear(cell_edges(grid, styles))
    vertex_ids: Dict[Corner, int] = {}
    for e in edges:
        for v in (e.v1, e.v2):
            vertex_ids.setdefault(v, len(vertex_ids))
    out = ['namespace = "zdoom";']
    for (col, row), _ in sorted(vertex_ids.items(), key=lambda kv: kv[1]):
        out.append(f"vertex {{ x = {col * grid.cell:.1f}; y = {row * grid.cell:.1f}; }}")
    sides = []
    for e in edges:
        front = len(sides)
        if e.back < 0:
            sides.append(f'sidedef {{ sector = {e.front}; texturemiddle = "{e.texture}"; }}')
            out.append(f"linedef {{ v1 = {vertex_ids[e.v1]}; v2 = {vertex_ids[e.v2]}; "
                       f"sidefront = {front}; blocking = true; }}")
        else:
            sides.append(f"sidedef {{ sector = {e.front}; }}")
            sides.append(f"sidedef {{ sector = {e.back}; }}")
            out.append(
                f"linedef {{ v1 = {vertex_ids[e.v1]}; v2 = {vertex_ids[e.v2]}; sidefront = {front}; "
                f"sideback = {front + 1}; twosided = true; }}"
            )
    out += sides
    for s in styles:
        out.append(
            f'sector {{ heightfloor = 0; heightceiling = {s.height}; texturefloor = "{s.floor}"; '
            f'textureceiling = "{s.ceiling}"; lightlevel = {s.light}; }}'
        )
    flags = " ".join(f"{f} = true;" for f in ("skill1", "skill2", "skill3", "skill4", "skill5", "single", "coop", "dm"))
    for t in things:
        out.append(f"thing {{ x = {t.x:.1f}; y = {t.y:.1f}; angle = {t.angle}; type = {t.type}; {flags} }}")
    return "\n".join(out) + "\n"
