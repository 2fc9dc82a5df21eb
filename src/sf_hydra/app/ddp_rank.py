"""Local rank r > 0 of a data-parallel run's node: `python -m sf_hydra.app.ddp_rank <run_dir>/ranks/config.yaml`,
started by local rank 0 of its node (sf_hydra.app.topology.local.start_local_ranks) with the rendezvous variables
and rank 0's start decision set. It
trains with the config that process composed and checked (resolved, as YAML: reading it runs no code); it writes
nothing into the run folder but its log (its stdout) and, on several machines, its record (ranks/rank_<r>.json).

Imports stay inside functions: the sampler's processes import this module again (as `__mp_main__`)."""

from __future__ import annotations


def read_config(path):
    """The config local rank 0 wrote for its node's ranks (resolved, as YAML), typed as Hydra composed it: merged
    onto the schema (sf_hydra.config.schema: TrainConfig, the env node by its family's EnvConfig subclass, else
    EnvConfig), whose dataclasses the code reads (OmegaConf.to_object), and struct, so that a key the code mistypes
    raises here as it does in rank 0."""
    from omegaconf import OmegaConf

    from sf_hydra.config.schema import EnvConfig, TrainConfig
    from sf_hydra.config.store import env_schemas

    saved = OmegaConf.load(path)
    schema = OmegaConf.structured(TrainConfig)
    schema.env = OmegaConf.structured(env_schemas().get(OmegaConf.select(saved, "env.family"), EnvConfig))
    cfg = OmegaConf.merge(schema, saved)
    OmegaConf.set_struct(cfg, True)
    return cfg


def main(argv=None) -> int:
    import logging
    import os
    import sys

    from sf_hydra.config import ConfigError
    from sf_hydra.core.faults import Fault, NonFiniteTraining

    argv = sys.argv[1:] if argv is None else argv
    cfg = read_config(argv[0])
    rank = int(os.environ.get("LOCAL_RANK", 0))  # on several machines the node's ranks follow node n's first
    rank += int(os.environ.get("NODE_RANK", 0)) * cfg.hardware.devices if cfg.hardware.num_nodes > 1 else 0
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, force=True,
                        format=f"[%(asctime)s][rank {rank}, pid %(process)d][%(levelname)s] %(message)s")

    from sf_hydra.app.train import train
    from sf_hydra.sampler.sampler import SamplerError

    try:
        train(cfg)
    except (ConfigError, SamplerError, NonFiniteTraining, Fault) as e:
        logging.getLogger("sf_hydra").error("%s", e)
        return getattr(e, "exit_code", 1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
