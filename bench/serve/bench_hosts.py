"""The dashboard's host pages on a crawl of the size Heritrix's users run: the time of one request.

Writes a synthetic finished crawl directory once (a crawl table of `--hosts` hosts with 1-3 fetched
URLs each, one host `big.example` with `--big-host` URLs all linking to its home page, so that the
home page's row carries as many anchors; a frontier report, DIR/hosts.json, listing 200 hosts as a
crawl's does), then times requests to the dashboard's app in this process (aiohttp's test server on
loopback, the same handlers and view as `crawlspace serve`): the first hosts request apart (it scans the
table), then for each kind of request the first (which orders the hosts by a column not asked for
before, or scans a host) and the median and largest of `--repeat` more, with the answer's size.
It runs against any checkout: `PYTHONPATH=/path/to/other/checkout` measures that one (an older
dashboard ignores the query parameters and answers every host).

    .venv/bin/python bench/serve/bench_hosts.py [--hosts 100000 --big-host 100000 --repeat 5 --dir D]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp.test_utils import TestClient, TestServer

from crawlspace.serve.app import make_app
from crawlspace.serve.security import Guard
from crawlspace.serve.view import CrawlView
from crawlspace.store.crawltable import CrawlTable, FetchInfo
from crawlspace.store.pagestore import TABLE_DIR

BIG_HOST = "big.example"
STATUSES = (200,) * 17 + (301, 404, 500)


def write_crawl(directory: Path, hosts: int, big_host: int, seed: int = 1) -> None:
    """A finished crawl's files, as much as the dashboard reads of them (no WARC files: not asked here)."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    now = 1_790_000_000.0
    table = CrawlTable(directory / TABLE_DIR, sync=False)
    names = [f"h{number:06d}-{rng.randrange(1 << 30):08x}.example" for number in range(hosts)]

    def fetch(status: int, at: float) -> FetchInfo:
        return FetchInfo(
            status=status, outcome="ok" if status < 400 else "http-error", fetched=at, fetches=1, changes=0,
            first_fetched=at, duration=rng.uniform(0.01, 2.0), length=rng.randrange(200, 60000),
            content_type="text/html",
        )  # fmt: skip

    for name in names:
        for path in range(rng.choice((1, 1, 2, 3))):
            at = now - rng.uniform(0, 3600)
            table.put(f"http://{name}/p{path}", "fetch", fetch(rng.choice(STATUSES), at), timestamp=at)
        if table.pending >= 20000:
            table.commit(sync=False)
    home = f"http://{BIG_HOST}/"
    table.put(home, "fetch", fetch(200, now - 1), timestamp=now - 1)
    for number in range(big_host):
        url, at = f"http://{BIG_HOST}/page/{number}", now - rng.uniform(0, 3600)
        table.put(url, "fetch", fetch(rng.choice(STATUSES), at), timestamp=at)
        table.put(home, "anchor", f"home from {number}", qualifier=url, timestamp=at)
        if table.pending >= 20000:
            table.commit(sync=False)
    table.commit(sync=True)
    table.close()
    causes = ("crawl-delay", "min-delay", "10x-rule", "backoff")
    rows = [
        {
            "host": name, "status": "active", "queued": rng.randrange(1, 5000), "in_flight": rng.randrange(2),
            "next_contact_in": rng.uniform(0, 30), "delay": rng.uniform(0.5, 30), "delay_cause": rng.choice(causes),
            "crawl_delay": None, "failures": rng.randrange(3), "parks": 0, "last_fetch_seconds": 0.3,
            "last_contact_ago": 1.0, "address": "192.0.2.1",
        }
        for name in rng.sample(names, min(200, len(names)))
    ]  # fmt: skip
    report = {
        "format": 1, "time": now, "hosts": hosts + 1, "listed": len(rows), "limit": 200, "by_status": {"active": 200},
        "by_cause": {}, "back_queued": sum(row["queued"] for row in rows), "front_queued": 0, "rows": rows,
    }  # fmt: skip
    (directory / "hosts.json").write_text(json.dumps(report))
    line = {"time": now, "pages": hosts * 2 + big_host, "elapsed": 3600.0}
    (directory / "progress.jsonl").write_text(json.dumps(line) + "\n")
    stats = {"finished_at": now, "pages_fetched": hosts * 2 + big_host, "termination": "max_pages"}
    (directory / "stats.json").write_text(json.dumps(stats))


REQUESTS = (
    ("hosts API, page 2 by pages", "/api/hosts?page=2&per=100"),
    ("hosts API, by queued, page 50", "/api/hosts?sort=queued&order=desc&page=50&per=100"),
    ("hosts API, by host, filtered", "/api/hosts?sort=host&order=asc&q=h0123"),
    ("hosts page (HTML), page 2", "/hosts?page=2"),
    (f"host API, {BIG_HOST}", f"/api/hosts/{BIG_HOST}"),
    (f"host page, {BIG_HOST}", f"/hosts/{BIG_HOST}"),
    (f"page page, {BIG_HOST}'s home", "/page?url=" + quote(f"http://{BIG_HOST}/", safe="")),
)


async def measure(directory: Path, repeat: int) -> list[dict[str, Any]]:
    app = make_app(CrawlView(directory), Guard(token=None))
    results = []
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        began = time.perf_counter()
        first = await client.get(REQUESTS[0][1])
        body = await first.read()
        results.append(
            {"request": "first hosts request (scans the table)", "status": first.status, "bytes": len(body),
             "first_ms": 1000 * (time.perf_counter() - began), "median_ms": math.nan, "max_ms": math.nan}
        )  # fmt: skip
        for name, path in REQUESTS:
            times, size, status = [], 0, 0
            for _ in range(repeat + 1):
                began = time.perf_counter()
                response = await client.get(path)
                size, status = len(await response.read()), response.status
                times.append(1000 * (time.perf_counter() - began))
            results.append(
                {"request": name, "status": status, "bytes": size, "first_ms": times[0],
                 "median_ms": statistics.median(times[1:]), "max_ms": max(times[1:])}
            )  # fmt: skip
    return results


def reorder(directory: Path) -> list[tuple[str, float]]:
    """What a crawl-state change costs the next hosts request (the orders computed again), measured on
    the host table alone: a new scan (every order), a new frontier report (the report's columns)."""
    from crawlspace.serve.hosttable import HostTable  # an older checkout has none: ImportError, told in main()

    view = CrawlView(directory)
    view.refresh()
    figures, live = view.figures(), view.host_files().rows()
    assert figures is not None
    table, hosts = HostTable(), dict(figures.hosts)
    began = time.perf_counter()
    table.update(hosts, figures.crawl_delays, live)
    table.order("pages", True)
    scan = time.perf_counter() - began
    table.order("queued", True)
    moved = {name: dict(row, queued=row.get("queued", 0) + 1) for name, row in live.items()}
    began = time.perf_counter()
    table.update(hosts, figures.crawl_delays, moved)
    table.order("pages", True)  # kept
    table.order("queued", True)
    report = time.perf_counter() - began
    view.close()
    return [
        ("a new scan: update and order by pages", 1000 * scan),
        ("then a new report: order by queued", 1000 * report),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--big-host", type=int, default=100_000, help=f"URLs of {BIG_HOST}")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="keep the synthetic crawl here (written if missing)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-hosts-") as tmp:
        directory = args.dir or Path(tmp) / "crawl"
        if not (directory / "stats.json").exists():
            began = time.perf_counter()
            write_crawl(directory, args.hosts, args.big_host)
            took = time.perf_counter() - began
            print(f"wrote {args.hosts} hosts and {args.big_host} URLs of {BIG_HOST} in {took:.1f} s")
        try:
            for what, ms in reorder(directory):
                print(f"{what:>40}: {ms:9.1f} ms")
        except ImportError:
            print("(no serve/hosttable.py in this checkout: no reordering to measure)")
        for result in asyncio.run(measure(directory, args.repeat)):
            print(
                f"{result['request']:>40}: {result['status']} {result['bytes']:>11,} bytes  "
                f"first {result['first_ms']:8.1f} ms, then median {result['median_ms']:7.1f} ms, "
                f"max {result['max_ms']:7.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
