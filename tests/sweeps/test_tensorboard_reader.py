"""sf_hydra.report.tensorboard.read_scalars, the one reader of event files (report, benchmarks,
tests), against a file written by torch's SummaryWriter (what Lightning's TensorBoardLogger uses)."""

from torch.utils.tensorboard import SummaryWriter

from sf_hydra.report.curves import read_curve
from sf_hydra.report.tensorboard import Scalar, read_scalars


def test_reads_every_value_of_every_tag_in_write_order(tmp_path):
    writer = SummaryWriter(log_dir=str(tmp_path / "tb"))
    for step, value in [(100, 1.0), (200, 2.5), (300, 2.0)]:
        writer.add_scalar("episode/return", value, global_step=step)
    writer.add_scalar("perf/fps", 1234.0, global_step=300)
    writer.add_scalar("episode/return", 4.0, global_step=200)  # a resumed run logs step 200 again
    writer.close()

    scalars = read_scalars(tmp_path)
    assert set(scalars) == {"episode/return", "perf/fps"}
    returns = scalars["episode/return"]
    assert all(isinstance(s, Scalar) and s.wall_time > 0 for s in returns)
    assert [(s.step, s.value) for s in returns] == [(100, 1.0), (200, 2.5), (300, 2.0), (200, 4.0)]
    assert [(s.step, s.value) for s in scalars["perf/fps"]] == [(300, 1234.0)]
    curve = read_curve(tmp_path)  # the report keeps the latest value per step, sorted by step
    assert list(curve.steps) == [100, 200, 300] and list(curve.values) == [1.0, 4.0, 2.0]


def test_a_run_without_event_files_reads_empty(tmp_path):
    assert read_scalars(tmp_path) == {} and read_curve(tmp_path) is None
