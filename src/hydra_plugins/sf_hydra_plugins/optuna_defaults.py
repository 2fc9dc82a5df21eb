"""`hydra/sweeper=optuna` with defaults for tuning APPO, replacing the plugin's own node.

The plugin's defaults minimise, keep the study in memory and search nothing. Ours maximise what
train.py returns (the final average return), keep the study in an sqlite file in the sweep's
folder (re-running the command continues the study), and search the learning rate and the
entropy coefficient unless `hydra.sweeper.params` says otherwise. Hydra's plugin scan runs
this module after the Optuna plugin's own (`sf_...` sorts after `hydra_...`), so this node wins.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from hydra.core.config_store import ConfigStore

try:
    from hydra_plugins.hydra_optuna_sweeper.config import Direction, OptunaSweeperConf
except ImportError:  # the `optuna` extra is not installed
    OptunaSweeperConf = None

SEARCH_SPACE = {
    "algo.learning_rate": "tag(log, interval(0.00001, 0.01))",
    "algo.exploration_loss_coeff": "tag(log, interval(0.0001, 0.03))",
}


def register() -> None:
    if OptunaSweeperConf is None:
        return

    @dataclass
    class AppoOptunaSweeperConf(OptunaSweeperConf):
        direction: Any = Direction.maximize
        storage: Optional[Any] = "${sf_sqlite_path:${train_dir}/multirun/${sweep_name}/optuna.db}"
        study_name: Optional[str] = "${sweep_name}"
        n_jobs: int = 1  # trials at once: each is a whole training run
        params: Optional[Dict[str, str]] = field(default_factory=lambda: dict(SEARCH_SPACE))

    ConfigStore.instance().store(group="hydra/sweeper", name="optuna", node=AppoOptunaSweeperConf, provider="sf_hydra")


register()
