"""End-to-end crawl of the simulated web, judged from the server's request log and the ground truth."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from fastwarc.warc import ArchiveIterator as FastArchiveIterator
from warcio.archiveiterator import ArchiveIterator

from crawlspace.simweb import RunningServer, SimWeb, judge_crawl
from tests.conftest import run_cli

MIN_DELAY = 0.02


def test_polite_complete_crawl(small_web: SimWeb, served_small_web: RunningServer, tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    result = run_cli(
        "crawl", str(served_small_web.seeds_file), "--out", str(out),
        "--hosts-file", str(served_small_web.hosts_file), "--allow-private-addresses",
        "--min-delay", str(MIN_DELAY), "--max-seconds", "90", "--no-progress",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    served_small_web.stop()
    verdict = judge_crawl(small_web, served_small_web.read_log(), served_small_web.seeds, min_delay=MIN_DELAY)
    assert verdict.expected, "the ground truth expects some fetches"
    assert not verdict.missing, verdict.summary()
    assert not verdict.unexpected, verdict.summary()
    assert not verdict.disallowed, verdict.summary()
    assert not verdict.refetched, verdict.summary()
    assert not verdict.host_overlaps and not verdict.ip_overlaps, verdict.summary()
    assert not verdict.delay_violations, verdict.summary()
    assert verdict.ok

    stats = json.loads((out / "stats.json").read_text())
    assert stats["termination"] == "frontier-empty"
    assert stats["pages_fetched"] == len(verdict.expected)
    assert stats["robots_excluded"] > 0  # the simulated web has disallowed links

    # every fetched page is in the WARC files exactly once (response, or revisit for a duplicate body)
    warcs = sorted((out / "warc").glob("*.warc.gz"))
    assert warcs
    per_url: Counter[str] = Counter()
    warcio_records = 0
    for path in warcs:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                warcio_records += 1
                if record.rec_type in ("response", "revisit"):
                    url = record.rec_headers.get_header("WARC-Target-URI")
                    if not url.endswith("/robots.txt"):
                        per_url[url] += 1
    assert set(per_url) == verdict.expected
    assert max(per_url.values()) == 1

    # an independent reader sees the same records, and every block digest verifies
    fastwarc_records = 0
    for path in warcs:
        with path.open("rb") as stream:
            for fast in FastArchiveIterator(stream, parse_http=False):
                fastwarc_records += 1
                assert fast.verify_block_digest(), fast.record_id
    assert fastwarc_records == warcio_records


def test_loopback_refused_without_permission(served_small_web: RunningServer, tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    result = run_cli(
        "crawl", str(served_small_web.seeds_file), "--out", str(out),
        "--hosts-file", str(served_small_web.hosts_file), "--min-delay", "0", "--no-progress",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    served_small_web.stop()
    assert served_small_web.read_log() == []  # not one request reached the server
    stats = json.loads((out / "stats.json").read_text())
    assert stats["errors"].get("robots:guard-refused", 0) == len(served_small_web.seeds)
