"""A whole crawl with every hostile path on its own host beside a well-behaved site: the crawl ends,
quickly, with each misbehaviour in its outcome in stats.json, and the good site fully and politely
crawled, judged from the servers' request logs."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

from crawlspace.config import CrawlConfig
from crawlspace.crawl import CrawlEngine
from tests.dns.fake_dns import FakeDNS
from tests.fetch.hostile_server import HostileServer

HOSTILE_PATHS = {
    "slowloris": "/slowloris",
    "silent": "/silent",
    "endless": "/endless",
    "gzip-bomb": "/gzip-bomb",
    "br-bomb": "/br-bomb",
    "zstd-bomb": "/zstd-bomb",
    "short-length": "/short-length",
    "long-length": "/long-length",
    "garbage-status": "/garbage-status",
    "reset": "/reset",
    "loop": "/loop/a",
    "chain": "/chain/0",
    "huge": "/huge",
    "bad-utf8": "/bad-utf8",
    "lying-charset": "/lying-charset",
    "many-headers": "/many-headers",
    "flaky": "/flaky",
    "unavailable": "/unavailable",
}
MAX_REDIRECTS = 5


def crawl(tmp_path: Path, hostile: HostileServer, good: HostileServer, internal: HostileServer) -> dict[str, Any]:
    port = hostile.port
    with FakeDNS() as dns:  # names not mapped below are NXDOMAIN
        resolve = {f"{name}.test": "127.0.0.1" for name in HOSTILE_PATHS}
        resolve |= {"good.test": "127.0.0.2", "internal.test": "127.0.0.9", "open-redirect.test": "127.0.0.1"}
        config = CrawlConfig(
            resolve=resolve,
            dns_servers=[dns.address],
            dns_timeout=0.5,
            allow_networks=["127.0.0.1/32", "127.0.0.2/32"],  # not 127.0.0.9: an "internal" address
            concurrency=32,
            min_delay=0.05,
            delay_factor=1.0,
            max_delay=0.5,
            connect_timeout=1.0,
            read_timeout=0.5,
            total_timeout=1.0,
            max_body_bytes=1 << 20,
            max_decoded_bytes=1 << 20,
            max_redirects=MAX_REDIRECTS,
            max_retries=1,
            retry_delay=0.1,
            max_seconds=30,
            progress_interval=5,
        )
        seeds = [f"http://{name}.test:{port}{path}" for name, path in HOSTILE_PATHS.items()]
        seeds += [f"http://good.test:{good.port}/site/0", f"http://dead.test:{port}/a", f"http://dead.test:{port}/b"]
        seeds += [f"http://open-redirect.test:{port}/redirect-to?http://internal.test:{internal.port}/ok"]
        engine = CrawlEngine(config, tmp_path, live_progress=False)
        engine.add_seeds(seeds)
        asyncio.run(engine.run())
    stats: dict[str, Any] = json.loads((tmp_path / "stats.json").read_text())
    return stats


def test_hostile_hosts_do_not_stop_the_crawl(tmp_path: Path) -> None:
    with (
        HostileServer("127.0.0.1", prebuild_bombs=True, fail_times=1) as hostile,
        HostileServer("127.0.0.2", site_pages=30) as good,
        HostileServer("127.0.0.9") as internal,
    ):
        stats = crawl(tmp_path, hostile, good, internal)

        # the crawl ended on its own, before its 30 s limit (slowloris: 2 attempts of 1 s, with rests);
        # how fast is the benchmarks' business, not a test's on a shared machine
        assert stats["termination"] == "frontier-empty"

        # the good site was crawled completely, once per page, politely
        site = [r for r in good.requests if r.path.startswith("/site/")]
        assert sorted(r.path for r in site) == sorted(f"/site/{n}" for n in range(30))
        gaps = [b.at - a.at for a, b in itertools.pairwise(site)]
        assert min(gaps) >= 0.05 - 0.01
        assert good.max_active == 1

        outcomes = stats["outcomes"]
        for outcome in ("timeout", "too-large", "bad-response", "connection-reset", "3xx", "5xx", "2xx"):
            assert outcomes.get(outcome, 0) > 0, (outcome, outcomes)

        def hits(host: str, path: str) -> int:
            return sum(1 for r in hostile.requests if r.path == path and r.headers["host"].startswith(host))

        # transient failures retried a bounded number of times, through the frontier
        assert hits("slowloris.test", "/slowloris") == 2  # 1 + max_retries
        assert hits("unavailable.test", "/unavailable") == 2
        assert hits("flaky.test", "/flaky") == 2  # reset once, then answered
        assert stats["retries"] >= 4
        # a redirect loop ends by duplicate elimination; a 50-hop chain at the hop limit
        assert hits("loop.test", "/loop/a") == 1 and hits("loop.test", "/loop/b") == 1
        assert hits("chain.test", f"/chain/{MAX_REDIRECTS}") == 1
        assert hits("chain.test", f"/chain/{MAX_REDIRECTS + 1}") == 0
        assert stats["filtered"]["too-many-redirects"] == 1
        # pages with broken encodings were parsed: their links were followed
        assert hits("bad-utf8.test", "/site/1") == 1
        assert hits("lying-charset.test", "/site/2") == 1

        # a redirect to an internal address was refused after resolution, without a connection
        assert internal.connections == 0
        assert stats["guard"]["hosts"]["internal.test"]["reason"] == "loopback"
        # an unresolvable host is reported once; both its URLs are accounted for
        assert stats["dns"]["unresolvable"] == {"dead.test": "Domain name not found"}
        assert outcomes["dns-error"] == 2
        assert stats["dns"]["lookups"] == 1
        # every attempt, robots.txt included, has one outcome
        fetch = stats["fetch"]
        assert sum(fetch["outcomes"].values()) == fetch["attempts"]
        assert fetch["truncated"]["length"] >= 4  # endless, huge and the bombs


def test_cli_allow_network_and_network_sections_of_stats(tmp_path: Path) -> None:
    import subprocess
    import sys

    with HostileServer("127.0.0.2", site_pages=5) as good, HostileServer("127.0.0.9") as internal:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"http://good.test:{good.port}/site/0\nhttp://internal.test:{internal.port}/ok\n")
        command = [
            sys.executable, "-m", "crawlspace", "crawl", str(seeds), "--out", str(tmp_path / "out"),
            "--resolve", "good.test=127.0.0.2", "--resolve", "internal.test=127.0.0.9",
            "--allow-network", "127.0.0.2/32", "--min-delay", "0.05", "--no-progress",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        stats = json.loads((tmp_path / "out" / "stats.json").read_text())
        assert sorted(r.path for r in good.requests if r.path.startswith("/site/")) == [f"/site/{n}" for n in range(5)]
        assert internal.connections == 0
        assert stats["guard"]["hosts"]["internal.test"]["count"] >= 1
        assert stats["dns"]["static_answers"] > 0 and stats["dns"]["lookups"] == 0
        assert stats["fetch"]["attempts"] == sum(stats["fetch"]["outcomes"].values())
