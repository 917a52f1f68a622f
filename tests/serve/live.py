"""A crawl of the simulated web started through the CLI with `--serve 0`, and its dashboard's URL."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawlspace.serve.security import CSRF_HEADER
from crawlspace.simweb import RunningServer

REPO = Path(__file__).resolve().parents[2]
URL_LINE = re.compile(r"dashboard at (http://\S+)")


@dataclass
class LiveCrawl:
    process: subprocess.Popen[str]
    url: str
    out: Path
    stderr: list[str]
    reader: threading.Thread | None = None  # the thread filling `stderr`: done once the process has exited

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=10) as response:
            return json.loads(response.read())

    def overview(self) -> dict[str, Any]:
        return self.get("/api/overview")  # type: ignore[no-any-return]

    def control(self, command: str) -> dict[str, Any]:
        page = urllib.request.urlopen(self.url, timeout=10).read().decode()
        csrf = re.search(r'<meta name="csrf-token" content="([^"]+)"', page)
        assert csrf is not None
        request = urllib.request.Request(
            self.url.rstrip("/") + f"/api/control/{command}", method="POST", headers={CSRF_HEADER: csrf[1]}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def assert_ended_cleanly(self, timeout: float = 60.0) -> None:
        """The crawl process exits 0 within `timeout`; else the failure shows what it wrote last
        (a worker's traceback: the exit code alone says only that one died)."""
        code = self.process.wait(timeout)
        if self.reader is not None:
            self.reader.join(10)  # its last lines
        assert code == 0, f"exit code {code}; the crawl's last output:\n" + "".join(self.stderr[-60:])

    def wait_for(self, predicate: Any, timeout: float = 30.0, what: str = "") -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            overview = self.overview()
            if predicate(overview):
                return overview
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {overview['state']}, {overview['pages']} pages")
            time.sleep(0.1)


@contextmanager
def live_crawl(web: RunningServer, out: Path, *extra: str, processes: int = 1) -> Iterator[LiveCrawl]:
    """`crawlspace crawl` of the served web with its dashboard on a free port; stopped (SIGTERM, by its
    PID) if the test did not stop it."""
    command = [
        sys.executable, "-m", "crawlspace", "crawl", str(web.seeds_file), "--out", str(out),
        "--hosts-file", str(web.hosts_file), "--allow-private-addresses", "--no-progress",
        "--processes", str(processes), "--serve", "0", *extra,
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    lines: list[str] = []
    found: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            match = URL_LINE.search(line)
            if match:
                found.put(match[1])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        url = found.get(timeout=60)
        yield LiveCrawl(process, url, out, lines, reader)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
