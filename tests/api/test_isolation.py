"""A processor that raises, a filter that raises and a sink that cannot write: each is isolated (the crawl is
complete and polite, judged from the server's side), reported once per distinct error with its URL and
traceback, and counted in stats.json."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlspace import CrawlConfig, Crawler
from crawlspace.hooks import FrontierEntry, Item, JsonlSink, Page
from crawlspace.simweb import RunningServer, SimWeb, SimWebConfig, judge_crawl, serve_in_background

WEB = SimWebConfig(
    hosts=15, seed=21, mean_pages_per_host=8, max_pages_per_host=40, robots_crawl_delay=0.02, include_trap=False
)
MIN_DELAY = 0.02


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb.generate(WEB)


@pytest.fixture
def server(web: SimWeb, tmp_path: Path) -> Iterator[RunningServer]:
    with serve_in_background(web, tmp_path / "simweb", seeds=4) as running:
        yield running


def config_for(server: RunningServer) -> CrawlConfig:
    return CrawlConfig(
        hosts_file=str(server.hosts_file), allow_private_addresses=True, min_delay=MIN_DELAY, progress_interval=0.5
    )


def every_page(page: Page) -> Item:
    return {"url": page.url, "depth": page.depth, "status": page.status}


def fails_on_depth_one(page: Page) -> None:
    if page.depth == 1:
        raise ValueError(f"cannot handle {page.url}")


def fails_on_errors(page: Page) -> Iterator[Item]:
    yield {"url": page.url, "partial": True}  # emitted before the failure: kept
    if page.status >= 400:
        raise KeyError("status")


class FlakySink:
    """Fails every other write, like a disk that fills and empties."""

    def __init__(self) -> None:
        self.items: int = 0
        self.offered = 0

    def write(self, item: Item) -> None:
        self.offered += 1
        if self.offered % 2 == 0:
            raise OSError(28, "No space left on device")
        self.items += 1

    def close(self) -> None:
        return None


def test_failing_processors_and_sinks_do_not_stop_the_crawl(
    web: SimWeb, server: RunningServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = FlakySink()
    good = JsonlSink(tmp_path / "items.jsonl")
    broken = JsonlSink(tmp_path / "no-such-directory" / "items.jsonl")
    crawler = Crawler(
        config_for(server),
        out=tmp_path / "crawl",
        seeds=server.seeds,
        processors=[every_page, fails_on_depth_one, fails_on_errors],
        sinks=[good, flaky, broken],
        progress=False,
    )
    with caplog.at_level(logging.ERROR, logger="crawlspace.hooks"):
        stats = crawler.run()
    server.stop()
    verdict = judge_crawl(web, server.read_log(), server.seeds, min_delay=MIN_DELAY)
    assert verdict.ok, verdict.summary()
    assert stats.termination == "frontier-empty"

    pages = [item for item in map(json.loads, (tmp_path / "items.jsonl").read_text().splitlines()) if "depth" in item]
    assert {item["url"] for item in pages} == set(verdict.fetched)  # every page reached every processor
    depth_one = sum(1 for item in pages if item["depth"] == 1)
    failed_status = sum(1 for item in pages if item["status"] >= 400)
    assert depth_one > 1 and failed_status >= 1

    document = json.loads((tmp_path / "crawl" / "stats.json").read_text())
    extensions = document["extensions"]
    assert extensions["processors"]["fails_on_depth_one"]["errors"] == depth_one
    assert extensions["processors"]["fails_on_errors"]["errors"] == failed_status
    assert extensions["processors"]["fails_on_errors"]["items"] == len(pages)  # items before the raise kept
    items = 2 * len(pages)  # every_page's and fails_on_errors' partial items
    assert extensions["sinks"]["jsonl:items.jsonl"]["items"] == items
    assert (flaky.offered, flaky.items) == (items, items - items // 2)
    assert extensions["sinks"]["FlakySink"]["lost"] == items // 2
    assert extensions["sinks"]["jsonl:items.jsonl#2"]["lost"] == items  # nothing could be written there
    assert document["errors"]["processor-error"] == depth_one + failed_status
    assert document["errors"]["sink-error"] == items // 2 + items

    # reported once per distinct error: the URL of its first occurrence and the traceback
    reports = {(report["kind"], report["hook"]): report for report in extensions["errors"]}
    assert set(reports) == {
        ("processor", "fails_on_depth_one"),
        ("processor", "fails_on_errors"),
        ("sink", "FlakySink"),
        ("sink", "jsonl:items.jsonl#2"),
    }
    report = reports[("processor", "fails_on_depth_one")]
    assert report["count"] == depth_one
    assert report["url"] in verdict.fetched and report["error"].startswith("ValueError: cannot handle")
    assert 'raise ValueError(f"cannot handle {page.url}")' in report["traceback"]
    assert reports[("sink", "FlakySink")]["count"] == items // 2
    assert "No space left on device" in reports[("sink", "FlakySink")]["error"]
    assert "FileNotFoundError" in reports[("sink", "jsonl:items.jsonl#2")]["error"]
    logged = [record for record in caplog.records if record.name == "crawlspace.hooks"]
    assert len(logged) == 4  # one log record per distinct error, however often it happened
    messages = [record.getMessage() for record in logged]
    assert any("fails_on_depth_one" in message and report["url"] in message for message in messages)


def raises_on_s2(entry: FrontierEntry) -> bool:
    if "/s2/" in entry.url:
        raise RuntimeError("filter bug")
    return True


def returns_nothing_on_s3(entry: FrontierEntry) -> bool:
    if "/s3/" in entry.url:
        return None  # type: ignore[return-value]  # the bug under test
    return True


def test_failing_filters_reject_and_do_not_stop_the_crawl(web: SimWeb, server: RunningServer, tmp_path: Path) -> None:
    crawler = Crawler(
        config_for(server),
        out=tmp_path / "crawl",
        seeds=server.seeds,
        filters=[raises_on_s2, returns_nothing_on_s3],
        progress=False,
    )
    stats = crawler.run()
    server.stop()
    verdict = judge_crawl(web, server.read_log(), server.seeds, min_delay=MIN_DELAY)
    assert stats.termination == "frontier-empty"
    assert not any("/s2/" in url or "/s3/" in url for url in verdict.fetched)  # failing closed
    assert not verdict.unexpected and not verdict.refetched and not verdict.disallowed
    assert not verdict.host_overlaps and not verdict.delay_violations
    assert any("/s2/" in url for url in verdict.expected) and any("/s3/" in url for url in verdict.expected)
    assert len(verdict.fetched) > len(verdict.expected) // 3  # the rest of the web was crawled

    document = json.loads((tmp_path / "crawl" / "stats.json").read_text())
    filters = document["extensions"]["filters"]
    assert filters["raises_on_s2"]["errors"] == document["filtered"]["raises_on_s2:error"] > 0
    assert filters["returns_nothing_on_s3"]["errors"] == document["filtered"]["returns_nothing_on_s3:error"] > 0
    assert (
        document["errors"]["filter-error"]
        == filters["raises_on_s2"]["errors"] + filters["returns_nothing_on_s3"]["errors"]
    )
    reports = {report["hook"]: report for report in document["extensions"]["errors"]}
    assert set(reports) == {"raises_on_s2", "returns_nothing_on_s3"}
    assert reports["raises_on_s2"]["error"] == "RuntimeError: filter bug"
    assert "/s2/" in reports["raises_on_s2"]["url"]
    assert "TypeError" in reports["returns_nothing_on_s3"]["error"]
    assert reports["raises_on_s2"]["count"] == filters["raises_on_s2"]["errors"]
