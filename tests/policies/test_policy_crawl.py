"""Crawls of the simulated web under the ordering policies: the order changes, nothing else does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawlspace import CrawlConfig, Crawler
from crawlspace.frontier import FrontierEntry
from crawlspace.hooks import FileHandler
from crawlspace.policies import BacklinkCount, as_policy
from crawlspace.simweb import RunningServer, SimWeb, judge_crawl
from tests.conftest import run_cli

MIN_DELAY = 0.02


@pytest.mark.parametrize("policy", ["pagerank", "focused"])
def test_policy_crawl_is_complete_and_polite(
    policy: str, small_web: SimWeb, served_small_web: RunningServer, tmp_path: Path
) -> None:
    out = tmp_path / "crawl"
    topic = ["--topic", " ".join(small_web.renderer.corpus.words[1500:1520])] if policy == "focused" else []
    result = run_cli(
        "crawl", str(served_small_web.seeds_file), "--out", str(out),
        "--hosts-file", str(served_small_web.hosts_file), "--allow-private-addresses",
        "--min-delay", str(MIN_DELAY), "--concurrency", "2", "--max-seconds", "90", "--no-progress",
        "--policy", policy, *topic,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    served_small_web.stop()
    verdict = judge_crawl(small_web, served_small_web.read_log(), served_small_web.seeds, min_delay=MIN_DELAY)
    assert verdict.ok, verdict.summary()  # every URL once, robots obeyed, no politeness gap too short
    stats = json.loads((out / "stats.json").read_text())
    assert stats["termination"] == "frontier-empty"
    section = stats["policy"]
    assert section["policy"] == policy
    # every URL's record is freed when it is done; those left wait for a robots.txt retry
    assert section["pending"] == stats["robots_waiting"]
    assert section["requeued"] == section["superseded"]  # each requeued URL's stale copy was dropped
    assert section["done"] >= len(verdict.expected)
    if policy == "focused":
        assert section["pages_judged"] > 0 and 0.0 <= section["harvest_rate"] <= 1.0
    if policy == "pagerank":
        assert section["computations"] >= 1 and section["computation_failures"] == 0


def test_focused_without_topic_is_a_config_error(served_small_web: RunningServer, tmp_path: Path) -> None:
    result = run_cli(
        "crawl", str(served_small_web.seeds_file), "--out", str(tmp_path / "c"), "--policy", "focused",
        "--no-progress",
    )  # fmt: skip
    assert result.returncode == 2
    assert "focused" in result.stderr and "topic" in result.stderr


def test_a_policy_given_to_the_crawler_hears_the_pages(tmp_path: Path) -> None:
    """Crawler(prioritizer=...) with an ordering policy: it orders the frontier and is fed page events."""
    site = tmp_path / "site"
    site.mkdir()
    pages = {
        "index.html": '<a href="a.html">a</a> <a href="b.html">b</a> <a href="c.html">c</a>',
        "a.html": '<a href="c.html">c</a>',
        "b.html": '<a href="c.html">c</a> <a href="a.html">a</a>',
        "c.html": "<title>C</title>",
    }
    for name, html in pages.items():
        (site / name).write_text(html)
    handler = FileHandler(site)
    policy = BacklinkCount(8)
    stats = Crawler(
        CrawlConfig(scope="prefix"),
        out=tmp_path / "crawl",
        seeds=[handler.url_of(site / "index.html")],
        handlers={"file": handler},
        prioritizer=policy,
        progress=False,
    ).run()
    assert stats.pages_fetched == 4
    section = stats.sections["policy"]
    assert section["policy"] == "backlinks" and section["done"] == 4 and section["pending"] == 0
    assert as_policy(policy) is policy

    class Plain:
        levels = 2

        def priority(self, entry: FrontierEntry) -> int:
            return 1

    wrapped = as_policy(Plain())
    assert not wrapped.observes_pages and wrapped.prioritizer.levels == 2
    assert wrapped.stats()["policy"] == "custom (Plain)"
