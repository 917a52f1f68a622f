"""The dashboard attached to a live crawl (`crawl --serve`): live figures, pause, resume and stop over
HTTP, checked against the crawl's own figures and the simulated web's request log."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from crawlspace.simweb import RunningServer
from tests.serve.live import live_crawl


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
        assert crawl.process.wait(60) == 0
    time.sleep(1.5)  # the server writes its log at most a second behind
    arrivals = [entry.arrived for entry in served_small_web.read_log()]
    assert not [at for at in arrivals if quiet_from <= at <= quiet_until]  # the server's side: no request at all
    assert max(arrivals) > quiet_until
    stats = json.loads((out / "stats.json").read_text())
    assert stats["termination"] == "operator-stop"
    assert stats["pages_fetched"] > held
