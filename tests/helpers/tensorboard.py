"""Reads scalars back from a run's TensorBoard event files."""

from pathlib import Path
from typing import Dict, List, Tuple

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def read_scalars(run_dir: Path) -> Dict[str, List[Tuple[int, float]]]:
    acc = EventAccumulator(str(Path(run_dir) / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
