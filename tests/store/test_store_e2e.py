"""End to end: crawls of the simulated web leave valid WARC files, CDXJ indexes and a crawl table
whose anchors match the web's ground truth; a crawl killed with kill -9 is valid after resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastwarc.warc import ArchiveIterator as FastIterator
from fastwarc.warc import WarcRecordType

from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.simweb.server import RunningServer, serve_in_background
from crawlspace.store import CdxjIndex
from crawlspace.store.cdxj import cdxj_path
from crawlspace.store.export import page_records
from crawlspace.store.reader import CrawlReader
from crawlspace.store.rowkey import row_key
from crawlspace.store.warc import Capture, iter_records, read_record

ROOT = Path(__file__).resolve().parents[2]
WEB = SimWebConfig(hosts=16, seed=5, mean_pages_per_host=30, robots_crawl_delay=0.0, include_trap=False)


def crawl_command(server: RunningServer, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "crawlspace", "crawl", str(server.seeds_file), "--out", str(out),
        "--hosts-file", str(server.hosts_file), "--allow-private-addresses", "--min-delay", "0",
        "--no-progress", "--concurrency", "16", *extra,
    ]  # fmt: skip


def environment() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimWeb, Path]]:
    web = SimWeb.generate(WEB)
    root = tmp_path_factory.mktemp("e2e")
    with serve_in_background(web, root / "server", seeds=4) as server:
        done = subprocess.run(
            crawl_command(server, root / "crawl", "--max-pages", "250"),
            capture_output=True, text=True, timeout=120, env=environment(),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
    yield web, root / "crawl"


def warc_paths(crawl: Path) -> list[Path]:
    return sorted((crawl / "warc").glob("*.warc.gz"))


def assert_valid_warcs(crawl: Path) -> int:
    """Both readers accept every file and every digest; returns the number of records."""
    paths = warc_paths(crawl)
    assert paths
    check = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", *map(str, paths)], capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    records = 0
    for path in paths:
        assert cdxj_path(path).exists(), path
        for record in FastIterator(str(path), parse_http=False):
            assert record.verify_block_digest(), (path, record.record_id)
            records += 1
        for record in FastIterator(str(path), parse_http=True, record_types=WarcRecordType.response):
            assert record.verify_payload_digest(), (path, record.record_id)
    return records


def test_warc_files_are_valid_for_two_readers(crawled: tuple[SimWeb, Path]) -> None:
    _, crawl = crawled
    assert assert_valid_warcs(crawl) > 250


def test_every_stored_capture_is_in_the_table_and_the_index(crawled: tuple[SimWeb, Path]) -> None:
    _, crawl = crawled
    index = CdxjIndex(crawl / "warc")
    captures = 0
    with CrawlReader(crawl) as reader:
        for path in warc_paths(crawl):
            for record in iter_records(path):
                assert not record.problem
                if record.type not in ("response", "revisit"):
                    continue
                captures += 1
                url = record.headers["warc-target-uri"]
                row = reader.table.get(url, versions=16)
                assert row is not None, url
                pointers = [Capture.from_list(cell.value) for cell in row.versions("content", "warc")]
                assert any(p.filename == path.name and p.offset == record.offset for p in pointers), url
                assert any(entry.offset == record.offset for entry in index.captures(url)), url
    assert captures > 200


def test_anchors_match_the_ground_truth(crawled: tuple[SimWeb, Path]) -> None:
    """Every link of every stored page is an anchor cell on its target's row, with its text."""
    web, crawl = crawled
    checked = 0
    targets_with_many_sources = 0
    with CrawlReader(crawl) as reader:
        anchors: dict[str, dict[str, str]] = {}
        for row in reader.table.scan(family="anchor", versions=1):
            anchors[row.url] = {anchor.source: anchor.text for anchor in row.anchors}
        for row in reader.table.scan(family="fetch"):
            fetch = row.fetch
            if not fetch or fetch.status != 200 or fetch.duplicate_of or row.url.endswith("/robots.txt"):
                continue
            expected: dict[str, str] = {}
            for link in web.links(row.url):
                if link.target is None or link.target == row.url:
                    continue
                text = " ".join(link.anchor_text.split())
                if link.target not in expected or (text and not expected[link.target]):
                    expected[link.target] = text
            for target, text in expected.items():
                assert anchors.get(target, {}).get(row.url) == text, (row.url, target)
                checked += 1
        targets_with_many_sources = sum(1 for sources in anchors.values() if len(sources) >= 3)
    assert checked > 500 and targets_with_many_sources > 10


def test_scan_order_is_reversed_host_order(crawled: tuple[SimWeb, Path]) -> None:
    _, crawl = crawled
    with CrawlReader(crawl) as reader:
        keys = [row.key for row in reader.table.scan()]
        assert keys == sorted(keys) and keys == sorted(row_key(row.url) for row in reader.table.scan())
        hosts = [key.split("/", 1)[0] for key in keys]
        runs = [host for number, host in enumerate(hosts) if number == 0 or hosts[number - 1] != host]
        assert len(runs) == len(set(runs))  # each host's rows are contiguous
        first_host = hosts[0]
        assert all(row.key.startswith(first_host + "/") for row in reader.table.scan(first_host + "/"))


def test_export_has_every_fetched_page(crawled: tuple[SimWeb, Path]) -> None:
    _, crawl = crawled
    records = list(page_records(crawl))
    with CrawlReader(crawl) as reader:
        fetched = [row.url for row in reader.table.scan(family="fetch")]
    assert [record.url for record in records] == fetched
    pages = [record for record in records if record.status == 200 and record.text and record.title]
    assert len(pages) > 150 and all(record.outlinks for record in pages[:50] if "robots.txt" not in record.url)


def test_a_crawl_killed_with_kill_9_leaves_valid_warc_files_after_resume(tmp_path: Path) -> None:
    web = SimWeb.generate(WEB.replace(latency=0.01))
    out = tmp_path / "crawl"
    with serve_in_background(web, tmp_path / "server", seeds=4) as server:
        process = subprocess.Popen(
            crawl_command(server, out, "--max-pages", "5000"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment(), start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                paths = warc_paths(out) if (out / "warc").is_dir() else []
                if paths and sum(path.stat().st_size for path in paths) > 300_000:
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the crawl wrote no WARC data in time")
            os.killpg(process.pid, signal.SIGKILL)  # the crawler and all its worker processes
        finally:
            process.wait()
        killed = warc_paths(out)
        assert killed and not any(cdxj_path(path).exists() for path in killed)  # left open by the dead crawl
        with CrawlReader(out) as reader:  # committed pointers point at whole records
            pointers = [row.latest("content", "warc") for row in reader.table.scan(family="content")]
        for pointer in filter(None, pointers):
            capture = Capture.from_list(pointer)
            assert read_record(out / "warc" / capture.filename, capture.offset, capture.length).type in (
                "response", "revisit",
            )  # fmt: skip
        resumed = subprocess.run(
            [sys.executable, "-m", "crawlspace", "crawl", "--resume", str(out), "--max-pages", "40", "--no-progress"],
            capture_output=True, text=True, timeout=120, env=environment(),
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert all(cdxj_path(path).exists() for path in killed)  # recovered: torn tails cut, indexes written
    assert assert_valid_warcs(out) > 40
