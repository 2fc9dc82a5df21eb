"""DECORATE and MAPINFO lumps of the battle maps (no ACS: no ACS compiler is available).

Every actor that must appear at a random free spot (the player at the start, monsters
when they spawn or respawn, items when the spawner drops them) runs the same relocation
states: pick one of 256 slots uniformly (two A_Jumps over 16 labels each: A_Jump draws a
byte, so 16 labels divide it evenly), each slot naming a free rectangle in proportion to
its area, then A_Warp to a random point of that rectangle. A_Warp fails when the actor
would overlap another solid actor; the actor then waits a tic and draws again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

from sf_hydra.envs.doom.maps.grid import SpotArea, allot_slots

SLOT_GROUPS = 16  # 16 x 16 = 256 slots: what one A_Jump byte covers evenly

IMP = "BattleImp"
MEDIKIT = "BattleMedikit"
CLIP = "BattleClip"
PLAYER = "BattlePlayer"
SPAWNER = "BattleItemSpawner"
PLACED_TOKEN = "BattlePlaced"
IMP_DOOMEDNUM = 30001
SPAWNER_DOOMEDNUM = 30002


@dataclass(frozen=True)
class ActorRules:
    monster_health: int = 20
    respawn_delay_tics: int = 35  # a dead monster's corpse stays this long, then a new one spawns
    initial_items: int = 4  # medikits and clips each, dropped at the start
    item_period_tics: int = 105  # then one medikit and one clip every this many tics


def relocation_states(areas: Sequence[SpotArea], done_label: str) -> List[str]:
    """States under `Relocate:` that warp the actor to a random free spot, then go to done_label."""
    slots = allot_slots([a.cells for a in areas], SLOT_GROUPS * SLOT_GROUPS)
    used = sorted(set(slots))
    lines = ["  Relocate:", "    TNT1 A 0 A_Jump(256, " + ", ".join(f'"G{g}"' for g in range(SLOT_GROUPS)) + ")"]
    for g in range(SLOT_GROUPS):
        group = slots[g * SLOT_GROUPS : (g + 1) * SLOT_GROUPS]
        lines += [f"  G{g}:", "    TNT1 A 0 A_Jump(256, " + ", ".join(f'"A{i}"' for i in group) + ")"]
    for i in used:
        a = areas[i]
        lines += [
            f"  A{i}:",
            f"    TNT1 A 0 A_Warp(AAPTR_DEFAULT, random({a.x0}, {a.x1}), random({a.y0}, {a.y1}), 0, random(0, 359), "
            f'WARPF_ABSOLUTEPOSITION | WARPF_ABSOLUTEANGLE, "{done_label}")',
            "    TNT1 A 1",
            "    Goto Relocate",
        ]
    return lines


def _actor(header: str, properties: Sequence[str], states: Sequence[str]) -> str:
    body = [f"actor {header}", "{"] + [f"  {p}" for p in properties] + ["  States", "  {"] + list(states) + ["  }", "}"]
    return "\n".join(body)


def _respawn_then_vanish(frames: Sequence[str], last_frame: str, delay: int) -> List[str]:
    return [f"    {f}" for f in frames] + [
        f"    {last_frame} {delay}",
        f'    {last_frame} 0 A_SpawnItemEx("{IMP}", 0, 0, 0, 0, 0, 0, 0, SXF_NOCHECKPOSITION)',
        "    Stop",
    ]


def imp_actor(areas: Sequence[SpotArea], rules: ActorRules) -> str:
    """A weak imp that appears at a random spot and, once dead, is replaced by a new one."""
    states = ["  Spawn:", "    TNT1 A 0 NoDelay"] + relocation_states(areas, "Idle") + [
        "  Idle:", "    TROO AB 10 A_Look", "    Loop",
        "  Death:",
    ] + _respawn_then_vanish(["TROO I 8", "TROO J 8 A_Scream", "TROO K 6", "TROO L 6 A_NoBlocking"], "TROO M",
                             rules.respawn_delay_tics) + [
        "  XDeath:",
    ] + _respawn_then_vanish(["TROO N 5", "TROO O 5 A_XScream", "TROO P 5", "TROO Q 5 A_NoBlocking", "TROO RST 5"],
                             "TROO U", rules.respawn_delay_tics)
    return _actor(f"{IMP} : DoomImp {IMP_DOOMEDNUM}", [f"Health {rules.monster_health}"], states)


def item_actor(name: str, parent: str, sprite: str, areas: Sequence[SpotArea]) -> str:
    states = (["  Spawn:", "    TNT1 A 0 NoDelay"] + relocation_states(areas, "Shown")
              + ["  Shown:", f"    {sprite} -1", "    Stop"])
    return _actor(f"{name} : {parent}", [], states)


def player_actor(areas: Sequence[SpotArea]) -> str:
    """The player warps once per episode: a token in its inventory marks it as placed
    (a standing player re-enters its Spawn state all the time)."""
    states = [
        "  Spawn:", f'    PLAY A 0 NoDelay A_JumpIfInventory("{PLACED_TOKEN}", 1, "Stand")',
    ] + relocation_states(areas, "Placed") + [
        "  Placed:", f'    PLAY A 0 A_GiveInventory("{PLACED_TOKEN}", 1)',
        "  Stand:", "    PLAY A -1", "    Stop",
    ]
    token = _actor(f"{PLACED_TOKEN} : Inventory", ["Inventory.MaxAmount 1", "+INVENTORY.UNDROPPABLE"],
                   ["  Spawn:", "    TNT1 A -1", "    Stop"])
    return token + "\n\n" + _actor(f"{PLAYER} : DoomPlayer", [], states)


def spawner_actor(rules: ActorRules) -> str:
    """Invisible; drops a medikit and a clip (which then warp themselves) now and then."""
    drop = [f'    TNT1 A 0 A_SpawnItemEx("{item}", 0, 0, 0, 0, 0, 0, 0, SXF_NOCHECKPOSITION)'
            for item in (MEDIKIT, CLIP)]
    states = ["  Spawn:", "    TNT1 A 0 NoDelay"] + drop * rules.initial_items + [
        "  Cycle:", f"    TNT1 A {rules.item_period_tics}",
    ] + drop + ["    Loop"]
    return _actor(f"{SPAWNER} {SPAWNER_DOOMEDNUM}", ["+NOINTERACTION", "+NOBLOCKMAP", "+NOSECTOR"], states)


def decorate_lump(areas: Sequence[SpotArea], rules: ActorRules) -> str:
    parts = [
        imp_actor(areas, rules),
        item_actor(MEDIKIT, "Medikit", "MEDI A", areas),
        item_actor(CLIP, "Clip", "CLIP A", areas),
        player_actor(areas),
        spawner_actor(rules),
    ]
    return "\n\n".join(parts) + "\n"


def mapinfo_lump() -> str:
    """Makes our player class (the one that warps at the start) the only one."""
    return f'gameinfo\n{{\n  playerclasses = "{PLAYER}"\n}}\n'
