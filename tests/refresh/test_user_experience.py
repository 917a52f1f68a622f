"""The user-experience refresh policy (seed 004 §4): pages that the logged queries show in their top results
are refreshed more than pages that change alike and that no logged query shows, as the server's request
log counts them. The crawl's own search index (built by the index job over the first pass, as
`crawlspace index DIR` beside a crawl would) and a query log of page titles give the weights."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from crawlspace import jobs
from crawlspace.api import Crawler
from crawlspace.config import ConfigError, CrawlConfig
from crawlspace.index import Index
from crawlspace.refresh.experience import FLOOR, UserExperienceWeights, impression, read_query_log
from crawlspace.simweb import SimWeb, judge_crawl, serve_in_background
from crawlspace.simweb.changes import Kind
from crawlspace.store.reader import CrawlReader
from tests.refresh.test_continuous_crawl import MIN_DELAY, changing_web

SCALE = 1440.0
WARMUP = 6.0  # seconds of the second run before counting: weights computed, pages rescheduled by them


def _crawl(out: Path, hosts_file: Path, seeds: list[str], *, resume: bool = False, **options: object) -> None:
    config = CrawlConfig(
        min_delay=MIN_DELAY, allow_private_addresses=True, hosts_file=str(hosts_file), processes=1,
        refresh=True, refresh_min_interval=0.5, checkpoint_interval=2.0, delay_factor=1.0, concurrency=16,
        **options,  # type: ignore[arg-type]
    )  # fmt: skip
    Crawler(config, out=out, seeds=() if resume else seeds, resume=resume, progress=False).run()


def _fast_pages(web: SimWeb, urls: set[str]) -> dict[str, float]:
    """The fetched pages (not copies) that change every ten minutes to every day, with their rates."""
    assert web.changes is not None
    fast: dict[str, float] = {}
    for url in urls:
        node = web.node_of(url)
        page = None if node is None else web.page_of(node)
        if page is not None and page == node:
            kind, rate = web.changes.kind_and_rate(page)
            if kind == Kind.FAST:
                fast[url] = rate
    return fast


@pytest.mark.slow
def test_pages_shown_for_logged_queries_are_refreshed_more_than_pages_that_change_alike(tmp_path: Path) -> None:
    web = changing_web(hosts=36, seed=4, time_scale=SCALE)
    out = tmp_path / "crawl"
    with serve_in_background(web, tmp_path / "simweb", seeds=4) as running:
        _crawl(out, running.hosts_file, running.seeds, max_seconds=18.0, max_rate=80.0, refresh_share=0.6,
               refresh_weights="none", refresh_max_interval=10.0)  # fmt: skip
        jobs.run(out, only=["index"])  # the crawl's search index, as `crawlspace index DIR` makes it
        with CrawlReader(out) as reader:
            titles = {page.url: page.title for page in reader.pages() if page.title and page.fetch.status == 200}
        fast = _fast_pages(web, set(titles))
        ordered = sorted(fast, key=lambda url: fast[url])  # by true change rate
        targets = ordered[0::2]  # every other one: the logged queries are their titles, as phrases
        queries = tmp_path / "queries.txt"
        queries.write_text("".join(f'"{titles[url]}"\n' for url in targets) * 3, encoding="utf-8")
        with Index(out / "jobs" / "index") as index:
            shown = {hit.url for url in targets for hit in index.search(f'"{titles[url]}"', 10).hits}
        assert set(targets) <= shown
        # each target paired with a page of the nearest rate that no logged query shows
        unshown = [url for url in ordered if url not in shown]
        pairs: list[tuple[str, str]] = []
        for url in targets:  # greedy matching by rate, each page used once
            if unshown:
                other = min(unshown, key=lambda candidate: abs(fast[candidate] - fast[url]))
                unshown.remove(other)
                pairs.append((url, other))
        assert len(pairs) >= 5, (len(fast), pairs)

        second_run = time.time()
        _crawl(out, running.hosts_file, running.seeds, resume=True, max_seconds=26.0, max_rate=8.0,
               refresh_share=0.9, refresh_max_interval=60.0, refresh_weights="none", refresh_policy="user-experience",
               refresh_query_log=str(queries), refresh_query_interval=1.0)  # fmt: skip
        running.stop()
        log = running.read_log()
    verdict = judge_crawl(web, log, running.seeds, min_delay=MIN_DELAY)
    assert not verdict.disallowed and not verdict.host_overlaps and not verdict.delay_violations, verdict.summary()
    counted = [entry for entry in log if entry.arrived >= second_run + WARMUP and entry.method == "GET"]
    requests = {url: 0 for pair in pairs for url in pair}
    for entry in counted:
        url = f"http://{entry.host}{entry.path}"
        if url in requests:
            requests[url] += 1
    shown_requests = sum(requests[target] for target, _ in pairs)
    alike_requests = sum(requests[other] for _, other in pairs)
    assert shown_requests >= 2 * max(alike_requests, 3), (shown_requests, alike_requests, requests)
    section = json.loads((out / "stats.json").read_text())["refresh"]["user_experience"]
    assert section["index"] == "ok" and section["computations"] >= 5 and section["weighted_pages"] >= len(targets)


def test_weights_sum_discounted_impressions_over_the_logged_queries(tmp_path: Path) -> None:
    from crawlspace.index import IndexDocument, build_index

    documents = [
        IndexDocument("http://a.test/", "apple pie", "apple pie with cinnamon"),
        IndexDocument("http://b.test/", "apple tart", "apple tart and pie"),
        IndexDocument("http://c.test/", "pear", "pear juice"),
    ]
    build_index(documents, tmp_path / "index", shards=1)
    log = tmp_path / "queries.txt"
    log.write_text("apple\n\n  apple  \npear\n" + "x" * 2000 + "\n", encoding="utf-8")
    assert read_query_log(log) == {"apple": 2, "pear": 1}
    weights = UserExperienceWeights(tmp_path / "index", log, k=10)
    found, stats = weights.compute()
    assert stats["queries"] == 2 and stats["queries_with_results"] == 2 and stats["index"] == "ok"
    with Index(tmp_path / "index") as index:
        apple = [hit.url for hit in index.search("apple", 10).hits]
    assert found[apple[0]] == pytest.approx(2 * impression(1)) and found[apple[1]] == pytest.approx(2 * impression(2))
    assert found["http://c.test/"] == pytest.approx(impression(1))
    weights.install(found, stats)
    assert weights.weight("http://c.test/") == pytest.approx(FLOOR + 1.0)
    assert weights.weight("http://nowhere.test/") == FLOOR
    assert not weights.due() and weights.stats["computations"] == 1
    missing = UserExperienceWeights(tmp_path / "no-index", log)
    nothing, said = missing.compute()
    assert nothing == {} and str(said["index"]).startswith("none")


def test_the_user_experience_policy_needs_a_readable_query_log(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="refresh_query_log"):
        CrawlConfig(refresh=True, max_rate=10.0, refresh_policy="user-experience")
    config = CrawlConfig(
        refresh=True, max_rate=10.0, refresh_policy="user-experience", refresh_query_log=str(tmp_path / "absent.txt"),
        processes=1,
    )  # fmt: skip
    with pytest.raises(ConfigError, match="cannot read the query log"):
        Crawler(config, out=tmp_path / "crawl", seeds=["http://a.test/"], progress=False).run()
