"""logger.flush_summaries_interval: the TensorBoard event file is flushed at most this often
(Sample Factory's flush_summaries_interval): by the Summaries callback's writes and by the
writer's own flush thread (flush_secs)."""

from sf_hydra.app.loggers import build_loggers
from sf_hydra.learner.callbacks import send_scalars
from sf_hydra.report.tensorboard import read_scalars
from tests.conftest import make_cfg


def test_scalars_are_flushed_at_the_interval(tmp_path):
    cfg = make_cfg(tmp_path, "logger.flush_summaries_interval=1000")
    (tb,) = build_loggers(cfg, tmp_path, resuming=False)
    writer = tb.experiment
    assert writer.flush_secs == 1000
    flushes, flush = [], writer.flush
    writer.flush = lambda: (flushes.append(1), flush())
    every = cfg.logger.flush_summaries_interval
    send_scalars([tb], {"perf/fps": 1.0}, 10, every)
    assert len(flushes) == 1 and [s.step for s in read_scalars(tmp_path)["perf/fps"]] == [10]  # on disk at once
    send_scalars([tb], {"perf/fps": 2.0}, 20, every)
    assert len(flushes) == 1  # within the interval: left to the writer
    send_scalars([tb], {"perf/fps": 3.0}, 30, flush_every=0.0)
    assert len(flushes) == 2 and [s.step for s in read_scalars(tmp_path)["perf/fps"]] == [10, 20, 30]
    tb.finalize("success")
