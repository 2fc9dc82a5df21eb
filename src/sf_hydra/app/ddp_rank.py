"""Learner rank r > 0 of a local data-parallel run: `python -m sf_hydra.app.ddp_rank <run_dir>/ranks/config.pkl`,
started by rank 0 (sf_hydra.app.ranks.start_local_ranks) with the rendezvous variables set. It trains with the
config rank 0 composed and checked; it writes nothing into the run folder but its log (its stdout).

Imports stay inside main(): the sampler's processes import this module again (as `__mp_main__`)."""

from __future__ import annotations


def main(argv=None) -> int:
    import logging
    import os
    import pickle
    import sys
    from pathlib import Path

    from sf_hydra.config import ConfigError
    from sf_hydra.core.faults import Fault, NonFiniteTraining

    argv = sys.argv[1:] if argv is None else argv
    rank = os.environ.get("LOCAL_RANK", "?")
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, force=True,
                        format=f"[%(asctime)s][rank {rank}, pid %(process)d][%(levelname)s] %(message)s")
    cfg = pickle.loads(Path(argv[0]).read_bytes())

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
