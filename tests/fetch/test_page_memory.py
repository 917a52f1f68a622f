"""The memory a crawl needs for pages at the size limits, measured from outside its process.

50 pages larger than every limit (16 MiB of ordinary HTML each: with Content-Length, chunked
without end, gzip-compressed), one per host, fetched at once by one crawl process with the default
limits (10 MiB of body, of decoded content; 1 Mi characters of text) and the text stored in the
crawl table: the process's peak RSS stays under PEAK_RSS_MB, the bound docs/architecture.md states,
and every page was fetched, stored truncated and parsed, so the bound is not met by dropping work.
Before these bounds the same crawl peaked at 869 MB, and 9 of its 50 fetches timed out while the
crawl was busy with the others' 10 MiB of text (bench/memory/bench_page_memory.py has both figures).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawlspace.parse.html import MAX_TEXT_CHARS
from crawlspace.store.reader import open_table
from crawlspace.store.warc import iter_records
from tests.fetch.hostile_server import HostileServer
from tests.fetch.peak_rss import crawl_measured, loopback_config

PAGES = 50
KINDS = ("plain", "chunked", "gzip")
PEAK_RSS_MB = 300  # measured 206 MB on the 2-core VM (docs/architecture.md, "Memory")
MAX_BODY = 10 * 1024 * 1024  # the defaults of max_body_bytes and max_decoded_bytes


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_fifty_maximum_size_pages_at_once_stay_under_the_stated_memory(tmp_path: Path) -> None:
    hosts = [f"big{n}.test" for n in range(PAGES)]
    config = loopback_config(hosts, store_text=True)
    out = tmp_path / "crawl"
    with HostileServer("127.0.0.1") as server:
        seeds = [f"http://{host}:{server.port}/big/{KINDS[n % 3]}/{n}" for n, host in enumerate(hosts)]
        measured = crawl_measured(seeds, out, config)
        in_flight = server.max_active
    assert measured.returncode == 0, measured.stderr[-3000:]
    assert in_flight >= PAGES * 3 // 4, in_flight  # they were fetched at once, not one after another

    stats = json.loads((out / "stats.json").read_text())
    assert stats["termination"] == "frontier-empty"
    assert stats["outcomes"] == {"too-large": PAGES}
    assert stats["fetch"]["truncated"] == {"length": PAGES}

    warc_dir = out / "warc"
    responses = {
        record.headers["warc-target-uri"]: record
        for path in sorted(warc_dir.glob("*.warc.gz"))
        for record in iter_records(path)
        if record.type == "response" and "/big/" in record.headers["warc-target-uri"]
    }
    assert sorted(responses) == sorted(seeds)
    for url, record in responses.items():
        assert record.headers["warc-truncated"] == "length", url
        body = record.http_parts()[2]
        if "/gzip/" in url:  # cut where the decoded content reached its limit
            assert 0 < len(body) < MAX_BODY, url
        else:
            assert len(body) == MAX_BODY, url

    table = open_table([out])
    try:
        rows = [row for row in table.scan(family=("title", "content", "fetch")) if "/big/" in row.url]
    finally:
        table.close()
    assert sorted(row.url for row in rows) == sorted(seeds)
    for row in rows:
        fetch = row.fetch
        assert fetch is not None and fetch.truncated == "length" and fetch.status == 200, row.url
        number = row.url.rsplit("/", 1)[1]
        assert row.title == f"big page {number}", row.url  # parsed: its head read,
        assert len(row.outlinks) > 9_900, row.url  # its links taken up to max_links_per_page (random: a few coincide),
        text = row.text  # and its text kept up to max_text_chars
        assert text is not None and MAX_TEXT_CHARS // 2 < len(text) <= MAX_TEXT_CHARS, row.url

    assert measured.peak_rss_mb < PEAK_RSS_MB, f"peak RSS {measured.peak_rss_mb:.0f} MB"
