"""kill -9 at a chosen moment, for the tests that prove a store or a crawl loses nothing to it.

The child is a Python script that sets up the state to be tested, prints one line (its "ready", or a
figure the test needs, such as how many bytes of a torn write reached the disk) and then waits; the
test SIGKILLs it by its PID at that line, never sooner and never by name, and checks it died of the
signal, not of its own error (which would leave another state behind and prove nothing)."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys


def kill_at_first_line(script: str, *args: str, timeout: float = 60.0) -> str:
    """Run `script` with `args` in a child interpreter and SIGKILL it once it has printed its first
    line; that line is returned. The child's stdin is a pipe kept open, so a script may wait for the
    kill with `sys.stdin.read()` as well as with a sleep."""
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            assert selector.select(timeout), f"the child printed nothing in {timeout} s"
        line = process.stdout.readline()
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL, (
        f"the child ended by itself ({process.returncode}): {process.stderr.read()}"
    )
    assert line, "the child printed no line before it died"
    return line.strip()
