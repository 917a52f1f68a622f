"""The dashboard attached to a live crawl (`crawl --serve`): live figures, pause, resume and stop over
HTTP, checked against the crawl's own figures and the simulated web's request log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from crawlspace.simweb import RunningServer
from tests.serve.live import REPO, URL_LINE, LiveCrawl, live_crawl


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_pause_resume_and_stop_a_live_crawl(served_small_web: RunningServer, tmp_path: Path, processes: int) -> None:
    out = tmp_path / "crawl"
    options = ("--min-delay", "0.3", "--max-seconds", "120")
    with live_crawl(served_small_web, out, *options, processes=processes) as crawl:
        crawl.wait_for(lambda o: o["state"] == "running" and o["pages"] > 5, what="pages")
        assert crawl.control("pause")["command"] == "pause"
        paused = crawl.wait_for(lambda o: o["state"] == "paused" and o["in_flight"] == 0, what="the pause")
        if processes > 1:  # every partition heard it
            assert [row["paused"] for row in paused["partitions"]] == [True] * processes
        held = paused["pages"]
        quiet_from = time.time()
        time.sleep(2.5)
        quiet_until = time.time()
        assert crawl.overview()["pages"] == held  # nothing fetched while paused
        crawl.control("resume")
        crawl.wait_for(lambda o: o["state"] == "running" and o["pages"] > held, what="the resume")
        crawl.control("stop")
        crawl.assert_ended_cleanly()
    time.sleep(1.5)  # the server writes its log at most a second behind
    arrivals = [entry.arrived for entry in served_small_web.read_log()]
    assert not [at for at in arrivals if quiet_from <= at <= quiet_until]  # the server's side: no request at all
    assert max(arrivals) > quiet_until
    stats = json.loads((out / "stats.json").read_text())
    assert stats["termination"] == "operator-stop"
    assert stats["pages_fetched"] > held


@pytest.mark.slow
def test_crawlspace_serve_watches_a_crawl_running_in_another_process(
    served_small_web: RunningServer, tmp_path: Path
) -> None:
    """... and each dashboard appends the searches made on it to its query log: the attached one to the
    crawl's refresh_query_log (what a continuous crawl's user-experience policy reads), the other to its
    --query-log, both outside the crawl directory."""
    out = tmp_path / "crawl"
    crawl_log, other_log = tmp_path / "crawl-queries.txt", tmp_path / "other-queries.txt"
    config = tmp_path / "crawl.toml"
    config.write_text(f"refresh_query_log = {json.dumps(str(crawl_log))}\n", encoding="utf-8")
    options = ("--config", str(config), "--min-delay", "0.3", "--max-seconds", "120")
    with live_crawl(served_small_web, out, *options) as crawl:
        crawl.wait_for(lambda o: o["pages"] > 5, what="pages")
        server = subprocess.Popen(
            [sys.executable, "-m", "crawlspace", "serve", str(out), "--port", "0", "--query-log", str(other_log)],
            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)),
        )  # fmt: skip
        try:
            assert server.stderr is not None
            line = server.stderr.readline()
            match = URL_LINE.search(line)
            assert match is not None, line
            other = LiveCrawl(server, match[1], out, [])  # the same requests, to the other process's dashboard
            first = other.wait_for(lambda o: o["state"] == "running" and o["pages"] > 5, what="the other's view")
            other.wait_for(lambda o: o["pages"] > first["pages"], what="pages rising in the other's view")
            hosts = other.get("/api/hosts")["hosts"]
            assert hosts and sum(host["pages"] for host in hosts) > 0
            crawl.get("/api/search?q=" + quote("searched\non the crawl's dashboard", safe=""))
            other.get("/api/search?q=searched+on+the+other")
            assert crawl_log.read_text(encoding="utf-8") == "searched on the crawl's dashboard\n"
            assert other_log.read_text(encoding="utf-8") == "searched on the other\n"
            crawl.control("stop")
            crawl.assert_ended_cleanly()
            stats = json.loads((out / "stats.json").read_text())
            final = other.wait_for(lambda o: o["state"] == "finished", what="the end, seen from the other")
            assert final["pages"] == stats["pages_fetched"] and final["termination"] == "operator-stop"
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(30)


@pytest.mark.slow
def test_the_attached_dashboard_is_a_process_that_ends_with_a_crawl_killed_by_sigkill(
    served_small_web: RunningServer, tmp_path: Path
) -> None:
    import urllib.error

    with live_crawl(served_small_web, tmp_path / "crawl", "--min-delay", "0.3", "--max-seconds", "120") as crawl:
        crawl.wait_for(lambda o: o["pages"] > 2, what="pages")
        children = Path(f"/proc/{crawl.process.pid}/task/{crawl.process.pid}/children").read_text().split()
        commands = [Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0") for child in children]
        assert [c for c in commands if b"serve" in c], "the dashboard runs in a child process, not in the crawl's"
        crawl.process.kill()
        crawl.process.wait(10)
        deadline = time.monotonic() + 15
        while True:
            try:
                crawl.overview()
            except (urllib.error.URLError, ConnectionError):
                break  # gone with its parent
            assert time.monotonic() < deadline, "the dashboard outlived the crawl killed with SIGKILL"
            time.sleep(0.2)
