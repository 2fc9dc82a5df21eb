"""One task of a data-parallel run as Slurm's srun starts it, without Slurm: `python -m tests.helpers.slurm_task
<rank> <world size> <job id> <port> <override>...` sets the variables a Slurm task reads (SLURM_PROCID, ...,
MASTER_ADDR/MASTER_PORT on this host) and trains, as the Hydra task of a `hydra/launcher=slurm` job does, with
the composed config of the overrides; every task runs the same command line and they start independently."""

from __future__ import annotations

import logging
import os
import sys


def slurm_variables(rank: int, world: int, job_id: str, port: int) -> dict:
    """What srun sets in task `rank` of a one-node step of `world` tasks (those our launch and Lightning read)."""
    return {"SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank), "SLURM_NODEID": "0", "SLURM_NTASKS": str(world),
            "SLURM_NTASKS_PER_NODE": str(world), "SLURM_JOB_ID": job_id, "SLURM_STEP_ID": "0",
            "SLURM_JOB_NAME": "sf_hydra_test", "SLURM_NODELIST": "127.0.0.1", "SLURMD_NODENAME": "localnode",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def main(argv) -> int:
    rank, world, job_id, port, *overrides = argv
    os.environ.update(slurm_variables(int(rank), int(world), job_id, int(port)))
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, force=True,
                        format=f"[%(asctime)s][task {rank}][%(levelname)s] %(message)s")
    from sf_hydra.app.train import train
    from tests.conftest import compose_cfg

    train(compose_cfg(*overrides))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
