"""The crawler uses both sets: a crawl of the simulated web, judged from the server's request log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from fastwarc.warc import ArchiveIterator, WarcRecordType

from crawlspace.config import CrawlConfig
from crawlspace.crawl.engine import CrawlEngine
from crawlspace.seen import ContentKind, ContentSeen, RunStore
from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.simweb.judge import judge_crawl
from crawlspace.simweb.server import serve_in_background

WEB = SimWebConfig(
    hosts=12,
    seed=5,
    mean_pages_per_host=8,
    duplicate_fraction=0.1,
    near_duplicate_fraction=0.1,
    robots_crawl_delay=0.0,
    include_trap=False,
)


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb.generate(WEB)


@pytest.mark.parametrize("store_near", [True, False])
def test_crawl_checks_urls_in_batches_and_content_for_duplicates(web: SimWeb, tmp_path: Path, store_near: bool) -> None:
    out = tmp_path / "crawl"
    with serve_in_background(web, tmp_path / "server", seeds=3) as server:
        config = CrawlConfig(
            min_delay=0.0,
            delay_factor=0.0,
            concurrency=8,
            allow_private_addresses=True,
            hosts_file=str(server.hosts_file),
            max_seconds=120.0,
            seen_buffer_urls=16,
            seen_cache_bytes=4096,
            store_near_duplicates=store_near,
        )
        engine = CrawlEngine(config, out, live_progress=False)
        assert engine.add_seeds(server.seeds) == len(set(server.seeds))
        stats = asyncio.run(engine.run())
        server.stop()
        verdict = judge_crawl(web, server.read_log(), server.seeds, min_delay=0.0)
    # the URL set let every URL through exactly once although it only checks batches of 16
    assert not verdict.refetched, verdict.summary()
    assert not verdict.missing, verdict.summary()
    assert stats.termination == "frontier-empty"

    fetched_ok = [url for url in verdict.fetched if web.status(url) == 200]
    clusters: dict[int, int] = {}
    for url in fetched_ok:
        cluster = web.duplicate_cluster(url)
        if cluster is not None:
            clusters[cluster] = clusters.get(cluster, 0) + 1
    assert stats.duplicate_content == sum(count - 1 for count in clusters.values()) > 0
    near_pairs = [url for url in fetched_ok if (original := web.near_duplicate_of(url)) and original in fetched_ok]
    assert stats.near_duplicate_content == len(near_pairs) > 0

    # both sets are on disk under the crawl directory and reopen as they were
    urls = RunStore(out / "seen" / "urls")
    assert len(urls) == stats.urls_discovered
    urls.close()
    content = ContentSeen(out / "seen" / "content")
    kinds = [content.verdict_of(url) for url in fetched_ok]
    assert sum(1 for kind in kinds if kind is not None and kind.kind is ContentKind.EXACT) == stats.duplicate_content
    assert sum(1 for kind in kinds if kind is not None and kind.kind is ContentKind.NEAR) == len(near_pairs)
    content.close()

    records: dict[str, set[str]] = {"revisit": set(), "response": set()}
    for path in (out / "warc").glob("*.warc.gz"):
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream, record_types=WarcRecordType.revisit | WarcRecordType.response):
                kind = "revisit" if record.record_type == WarcRecordType.revisit else "response"
                records[kind].add(record.headers["WARC-Target-URI"])
    exact = {url for url, kind in zip(fetched_ok, kinds, strict=True) if kind and kind.kind is ContentKind.EXACT}
    near = {url for url, kind in zip(fetched_ok, kinds, strict=True) if kind and kind.kind is ContentKind.NEAR}
    assert records["revisit"] == exact  # exact duplicates: revisit records (their originals were stored)
    assert (near <= records["response"]) is store_near
    assert not (near & records["response"]) or store_near


def test_a_new_crawl_into_the_same_directory_starts_with_empty_sets(web: SimWeb, tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    (out / "seen").mkdir(parents=True)
    old = RunStore(out / "seen" / "urls")
    old.test_and_set(np.arange(5, dtype=np.uint64))
    old.close()
    engine = CrawlEngine(CrawlConfig(), out, live_progress=False)
    assert len(engine.urlset) == 0 and len(engine.content) == 0
    engine.urlset.close()
    engine.content.close()


def test_seeds_beyond_one_buffer_all_reach_the_frontier(tmp_path: Path) -> None:
    engine = CrawlEngine(CrawlConfig(seen_buffer_urls=4), tmp_path / "crawl", live_progress=False)
    seeds = [f"http://h{index}.test/" for index in range(10)] + ["http://h3.test/"]
    assert engine.add_seeds(seeds) == 10
    assert len(engine.frontier) == 10 and engine.urlset.pending == 0
    engine.urlset.close()
    engine.content.close()
