"""The one reader of a run's TensorBoard event files (`<run_dir>/tb/`), used by the sweep
report, the benchmarks and the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, NamedTuple


class Scalar(NamedTuple):
    wall_time: float  # seconds since the epoch, when the value was logged
    step: int  # our runs log env steps (frames)
    value: float


def read_scalars(run_dir: Path) -> Dict[str, List[Scalar]]:
    """tag -> every value of that scalar, in the order the run wrote them (a resumed run may
    write a step twice). A run without a `tb/` folder (not started, or logger.tensorboard=false)
    reads as {}."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # heavy: only to read

    tb_dir = Path(run_dir) / "tb"
    if not tb_dir.is_dir():
        return {}
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})  # 0: keep every value
    acc.Reload()
    return {tag: [Scalar(e.wall_time, e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
