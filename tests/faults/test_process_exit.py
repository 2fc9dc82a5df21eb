"""`train.py` and `enjoy.py` end their process without the interpreter's teardown (cli.ends_process):
the atexit handlers still run, buffered output is written, the exit status is the entry point's,
and a non-daemon thread that still works is waited for."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import atexit, sys, threading, time
    from sf_hydra.cli import ends_process

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
