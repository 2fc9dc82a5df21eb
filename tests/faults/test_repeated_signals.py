"""What a stop signal after the first means (sf_hydra.core.signals): the same request delivered twice, an
abort that waits for the save under way, a note while the final checkpoint is written, or an abort now."""

import signal
import time

import pytest

from sf_hydra.core import signals


@pytest.fixture
def first_signal():
    """A run whose first SIGINT arrived now; the handlers themselves are left alone."""
    signals.catch(lambda *a: None, new_run=True)
    signals.record(signal.SIGINT)
    yield
    signals.release()


def _aborts():
    calls = []
    return calls, lambda: calls.append(time.monotonic())


def test_a_repeat_within_the_duplicate_window_is_the_same_request(first_signal):
    calls, abort = _aborts()
    assert signals.repeat(abort) == "duplicate"
    assert calls == [] and not signals.aborted()


def test_a_later_repeat_aborts_now(first_signal, monkeypatch):
    monkeypatch.setattr(signals, "DUPLICATE_SEC", 0.0)
    calls, abort = _aborts()
    assert signals.repeat(abort) == "abort"
    assert len(calls) == 1 and signals.aborted()


def test_a_later_repeat_during_a_save_aborts_once_the_save_is_done(first_signal, monkeypatch):
    monkeypatch.setattr(signals, "DUPLICATE_SEC", 0.0)
    calls, abort = _aborts()
    with signals.shielded():
        with signals.shielded():  # the best checkpoint checked inside a periodic save
            assert signals.repeat(abort) == "after_save"
        assert calls == []  # the inner save's end is not the outer save's
    assert len(calls) == 1 and signals.aborted()


def test_an_abort_raised_after_the_save_propagates_from_the_save(first_signal, monkeypatch):
    monkeypatch.setattr(signals, "DUPLICATE_SEC", 0.0)

    def abort():
        raise KeyboardInterrupt

    written = []
    with pytest.raises(KeyboardInterrupt):
        with signals.shielded():
            signals.repeat(abort)
            written.append("file")
    assert written == ["file"]


def test_while_finishing_a_repeat_is_noted_and_a_waiting_abort_dropped(first_signal, monkeypatch):
    monkeypatch.setattr(signals, "DUPLICATE_SEC", 0.0)
    calls, abort = _aborts()
    with signals.shielded():
        assert signals.repeat(abort) == "after_save"
        signals.finishing()  # training ended meanwhile: the final checkpoint follows this save
        assert signals.repeat(abort) == "finishing"
    assert calls == [] and not signals.aborted()


def test_a_new_run_forgets_the_last_runs_signals(first_signal, monkeypatch):
    monkeypatch.setattr(signals, "DUPLICATE_SEC", 0.0)
    signals.repeat(lambda: None)
    assert signals.aborted() and signals.received() == signal.SIGINT
    signals.catch(lambda *a: None, new_run=True)
    assert signals.received() is None and not signals.aborted()
    signals.record(signal.SIGTERM)
    signals.catch(lambda *a: None, new_run=False)  # training takes over from the start-up's handler
    assert signals.received() == signal.SIGTERM
