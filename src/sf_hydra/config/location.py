"""Where the configs are: the checkout's conf/ or the installed package's copy. The entry
points (cli.py) and the tools that read the config files (app/sample_factory/parameter_reference.py,
app/import_sf_config.py) all ask here, so they read the same folder."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Tuple

CONFIG_PACKAGE = "sf_hydra_conf"  # conf/ (and experiments/ in it) as installed by `pip install .`


@functools.lru_cache(maxsize=None)
def find_configs() -> Tuple[str, str]:
    """(config_path for Hydra, the same configs' folder on disk): the checkout's conf/ when sf_hydra
    runs from a checkout (`python train.py`, an editable install: an edit applies at once), else the
    configs the installed package ships, at Hydra's `pkg://sf_hydra_conf`."""
    checkout = Path(__file__).resolve().parents[3] / "conf"  # src/sf_hydra/config/ -> the checkout
    if (checkout / "train.yaml").is_file():
        return str(checkout), str(checkout)
    spec = importlib.util.find_spec(CONFIG_PACKAGE)
    if spec is None or spec.origin is None:
        raise SystemExit(f"sf_hydra: no configs: neither {checkout} nor the package {CONFIG_PACKAGE} "
                         "(reinstall: pip install sf_hydra)")
    return f"pkg://{CONFIG_PACKAGE}", str(Path(spec.origin).parent)
