"""How a run is laid over processes and hosts: one Topology per way, chosen once per run (`choose`) from the config
and the environment.

    one rank           base.Topology          this process holds the folder, decides and trains
    local ranks        local.LocalRanks       `hardware.devices=D`: the command starts ranks 1 .. D-1 itself
    Slurm tasks        slurm.SlurmTasks       `hydra/launcher=slurm`: one task per rank
    torchrun workers   torchrun.TorchrunWorkers  one worker per rank, started by torchrun
    several machines   nodes.Nodes            the same command per machine with MASTER_ADDR, NODE_RANK

Whichever it is, rank 0 alone holds and prepares the run folder and decides the run's start (start.RunStart), which
the others receive and act on: through the process group made before the start (group.py: torchrun's workers, the
several machines), the run folder (folder.py: Slurm's tasks, and every machine's check that it sees the folder) or
the environment of the ranks rank 0 starts (local.py)."""

from __future__ import annotations

from sf_hydra.app.ranks import ranks_of
from sf_hydra.app.topology.base import Topology
from sf_hydra.app.topology.start import RunStart

__all__ = ["RunStart", "Topology", "choose"]


def choose(cfg) -> Topology:
    """The topology of the run `cfg` describes, in this process (ConfigError, naming the key or variable, when the
    config and the environment contradict each other: app/ranks.py ranks_of)."""
    place = ranks_of(cfg.hardware.devices, cfg.hardware.num_nodes)
    if not place.distributed:
        return Topology(place)
    if place.via_slurm:
        from sf_hydra.app.topology.slurm import SlurmTasks

        return SlurmTasks(place)
    if place.via_torchrun:
        from sf_hydra.app.topology.torchrun import TorchrunWorkers

        return TorchrunWorkers(place)
    if place.via_env:
        from sf_hydra.app.ranks import env_rendezvous
        from sf_hydra.app.topology.nodes import Nodes

        hw = cfg.hardware
        return Nodes(place, env_rendezvous(hw.devices, hw.num_nodes), float(hw.ddp_timeout_sec))
    from sf_hydra.app.topology.local import LocalRanks

    return LocalRanks(place)
