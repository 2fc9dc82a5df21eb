"""The rules that need the env's spaces (and a model built for them) refuse a run before any
process starts and before the run folder is touched: `restart_behavior=overwrite` must not
delete the previous run for a key that is then refused. Each case goes through train() itself,
with a real env built once to read its spaces."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from sf_hydra.app.train import train
from sf_hydra.config import ConfigError

# (overrides, the key the message names, a text the message holds)
NEEDS_THE_ENV = [
    (["env=gym/pendulum", "algo.exploration_loss=symmetric_kl"], "algo.exploration_loss", "continuous action space"),
    (["env=gym/any", "env.id=tests.helpers.mixed_action_envs:MixedAction-v0", "algo.exploration_loss=symmetric_kl"],
     "algo.exploration_loss", "mixed action space"),
    (["env=gym/any", "env.id=tests.helpers.masked_envs:Masked-v0", "algo.exploration_loss=symmetric_kl"],
     "algo.exploration_loss", "masks actions"),
    (["env=gym/any", "env.id=tests.helpers.masked_envs:BoxMasked-v0"], "env.id", "has none to mask"),
    (["env=gym/any", "env.id=tests.helpers.space_envs:DictObs-v0", "algo.normalize_input_keys=[nope]"],
     "algo.normalize_input_keys", "nope"),
]


def _previous_run(run_dir):
    """A finished run's state, as far as prepare() can tell: files it would delete on overwrite."""
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "checkpoint_000000010_1000.pt").write_bytes(b"the previous run's weights")
    (run_dir / "summary.json").write_text("{}")


@pytest.mark.parametrize("overrides,key,says", NEEDS_THE_ENV)
def test_refused_before_workers_start_and_the_previous_run_is_kept(tmp_cfg, overrides, key, says):
    cfg = tmp_cfg(*overrides, "restart_behavior=overwrite", "train_for_env_steps=1000")
    run_dir = Path(cfg.run_dir)
    _previous_run(run_dir)
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(ConfigError) as info:
        train(cfg)
    err, msg = info.value, str(info.value)
    assert err.key == key and msg.startswith(f"{key}={err.value!r} is not allowed: ") and says in msg, msg
    new_children = [p for p in psutil.Process().children(recursive=True) if p.pid not in children_before]
    assert not new_children, [p.cmdline() for p in new_children]
    assert (run_dir / "checkpoints" / "checkpoint_000000010_1000.pt").read_bytes() == b"the previous run's weights"
    assert (run_dir / "summary.json").is_file()
