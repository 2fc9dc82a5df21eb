"""`train.py` and `enjoy.py` end their process without the interpreter's teardown (cli.ends_process):
the atexit handlers still run, buffered output is written, the exit status is the entry point's,
and a non-daemon thread that still works is waited for."""

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tests.faults.runs import REPO, TINY, env_with_repo

SCRIPT = textwrap.dedent('''
    import atexit, sys, threading, time
    from sf_hydra.app.cli import ends_process

    @ends_process
    def main():
        atexit.register(lambda: open(sys.argv[1], "w").write("atexit ran"))
        sys.stdout.write("buffered, no newline")
        if sys.argv[2] == "thread":
            threading.Thread(target=lambda: (time.sleep(0.5), print(" / the thread finished"))).start()
        if sys.argv[2] == "raise":
            raise RuntimeError("escaped")
        if sys.argv[2] != "return":
            sys.exit({"code": 3, "message": "a message", "thread": 4}[sys.argv[2]])

    main()
''')


@pytest.mark.parametrize("how, status, stdout, stderr", [
    ("code", 3, "buffered, no newline", ""),
    ("message", 1, "buffered, no newline", "a message"),
    ("return", 0, "buffered, no newline", ""),
    ("thread", 4, "buffered, no newline / the thread finished", ""),
    ("raise", 1, "buffered, no newline", "RuntimeError: escaped"),
])
def test_an_entry_point_exits_with_its_status_after_the_atexit_handlers(tmp_path, how, status, stdout, stderr):
    marker = tmp_path / "atexit.txt"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(marker), how], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == status, proc.stderr
    assert proc.stdout.strip() == stdout
    assert stderr in proc.stderr
    assert marker.read_text() == "atexit ran"


@pytest.mark.slow
def test_train_py_output_closes_when_its_process_exits(tmp_path):
    """train.py's stdout and stderr (pipes: `| tee log`, a test's captured output) close when its process exits:
    neither the sampler's fork server (ended at exit, sampler/mp.py stop_fork_server) nor torch's shared-memory
    manager (started with its stderr on /dev/null, mp.start_shm_manager) keeps them open. They did, ~1.1 s and
    ~2.1 s past the exit."""
    proc = subprocess.Popen([sys.executable, str(REPO / "train.py"), f"train_dir={tmp_path}", "experiment=run", *TINY],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_with_repo())
    closed = {}

    def read_to_the_end(name, stream):
        stream.read()
        closed[name] = time.monotonic()

    readers = [threading.Thread(target=read_to_the_end, args=(name, stream), daemon=True)
               for name, stream in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for reader in readers:
        reader.start()
    assert proc.wait(timeout=120) == 0
    exited = time.monotonic()
    for reader in readers:
        reader.join(timeout=0.5)
    assert set(closed) == {"stdout", "stderr"}, f"open 0.5 s after the exit: {({'stdout', 'stderr'} - set(closed))}"
    assert max(closed.values()) - exited < 0.5
