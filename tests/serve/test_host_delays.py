"""The frontier's host report through the dashboard, on a crawl of two hosts: one whose robots.txt asks
for a Crawl-delay, one that answers every page 429 with a Retry-After. The API must say which rule
holds each host back, and the delays the frontier applies, while the crawl runs."""

from __future__ import annotations

import concurrent.futures
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from crawlspace.api import Crawler
from crawlspace.config import CrawlConfig
from crawlspace.crawl.control import send_command
from crawlspace.serve.security import Guard
from crawlspace.serve.server import BackgroundDashboard
from tests.serve.hostile import loopback_site

CRAWL_DELAY = 2.5
RETRY_AFTER = 40


async def _handle(request: web.Request) -> web.Response:
    host = request.host.split(":")[0]
    if host == "slow.test":
        if request.path == "/robots.txt":
            return web.Response(text=f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n")
        links = "".join(f'<a href="/p{n}">p{n}</a> ' for n in range(20))
        return web.Response(text=f"<html><title>slow</title><body>{links}</body></html>", content_type="text/html")
    if request.path == "/robots.txt":
        return web.Response(status=404)
    return web.Response(status=429, text="slow down", headers={"Retry-After": str(RETRY_AFTER)})


def _get(base: str, path: str) -> Any:
    with urllib.request.urlopen(base.rstrip("/") + path, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_the_hosts_api_tells_a_crawl_delay_from_a_backoff(tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text("127.0.0.1 slow.test\n127.0.0.1 busy.test\n")
    with loopback_site(_handle) as port, concurrent.futures.ThreadPoolExecutor(1) as thread:
        seeds = [f"http://slow.test:{port}/", *(f"http://busy.test:{port}/b{n}" for n in range(5))]
        config = CrawlConfig(
            allow_private_addresses=True, hosts_file=str(hosts_file), min_delay=0.2, processes=1,
            progress_interval=0.3, max_seconds=20, per_ip=False,
        )  # fmt: skip
        crawl = thread.submit(Crawler(config, out=out, seeds=seeds, progress=False).run)
        dashboard = BackgroundDashboard(out, "127.0.0.1", 0, Guard(token=None))
        base = dashboard.start().url
        try:
            deadline = time.monotonic() + 15
            while True:
                hosts = {row["host"]: row for row in _get(base, "/api/hosts?sort=queued")["hosts"]}
                slow = (hosts.get(f"slow.test:{port}") or {}).get("live") or {}
                busy = (hosts.get(f"busy.test:{port}") or {}).get("live") or {}
                if slow.get("delay_cause") == "crawl-delay" and busy.get("delay_cause") == "backoff":
                    break
                assert time.monotonic() < deadline, f"no live delays yet: {slow}, {busy}"
                time.sleep(0.2)
            assert slow["delay"] == CRAWL_DELAY and slow["crawl_delay"] == CRAWL_DELAY
            assert slow["queued"] > 0 and slow["failures"] == 0 and slow["status"] == "active"
            assert 0 <= slow["next_contact"] - time.time() <= CRAWL_DELAY + 1
            assert busy["delay"] >= RETRY_AFTER and busy["failures"] >= 1  # Retry-After, or the retry's longer rest
            assert busy["next_contact"] - time.time() > RETRY_AFTER / 2
            host_page = _get(base, f"/api/hosts/busy.test:{port}")
            assert host_page["live"]["delay_cause"] == "backoff" and host_page["live"]["queued"] >= 1
            overview = _get(base, "/api/overview")
            assert overview["host_delays"]["by_cause"].get("crawl-delay") == 1
            assert overview["host_delays"]["by_cause"].get("backoff") == 1
            robots = overview["caches"]["robots"]
            assert robots["misses"] >= 2 and robots["hits"] >= 1  # each origin's first URL missed; later ones hit
            metrics = urllib.request.urlopen(base.rstrip("/") + "/metrics", timeout=10).read().decode()
            assert 'crawlspace_hosts_by_delay_cause{cause="backoff"} 1.0' in metrics
            assert "crawlspace_robots_cache_hits_total" in metrics
        finally:
            send_command(out, "stop")
            crawl.result(timeout=60)
            dashboard.stop()
