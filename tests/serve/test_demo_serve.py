"""`crawlspace demo --serve`: the dashboard is up during the demo and stays up after it, with search."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from pathlib import Path
from queue import Queue
from typing import Any

import pytest

from tests.serve.live import REPO


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_demo_keeps_the_dashboard_up_after_the_crawl(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    command = [sys.executable, "-m", "crawlspace", "demo", "--hosts", "20", "--seed", "7", "--out", str(out),
               "--no-progress", "--serve", "--port", "0"]  # fmt: skip
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    found: Queue[str] = Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            match = re.search(r"dashboard of this crawl, with its search page: (http://\S+)", line)
            if match:
                found.put(match[1])

    threading.Thread(target=read, daemon=True).start()
    try:
        url = found.get(timeout=200).rstrip("/")
        overview = _get(url + "/api/overview")
        stats = json.loads((out / "stats.json").read_text())
        assert overview["state"] == "finished" and overview["pages"] == stats["pages_fetched"]
        summary = json.loads((out / "demo-summary.json").read_text())
        query = summary["search"][0]["query"]
        hits = _get(url + "/api/search?q=" + urllib.parse.quote(query))["hits"]
        assert [hit["url"] for hit in hits[:3]] == [hit["url"] for hit in summary["search"][0]["results"]]
        assert process.poll() is None  # still serving
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
