"""A page's outdated content entries leave every partition (IIR 20.2.1 across partitions, issue 21): a
continuous crawl by two processes of a changing simulated web whose mirrors lag behind their originals
(`SimWebConfig.mirror_lag`), so the crawl meets a changed page's OLD content at its mirrors after it
has refetched the page. Such a fetch must not be called a duplicate of the page, which no longer has
that content, whichever partition owns the body's fingerprint (half the time the other one: the
outdated notice of distributed.outdated must have reached it)."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from crawlspace.api import Crawler
from crawlspace.config import CrawlConfig
from crawlspace.simweb import SimWeb, SimWebConfig, judge_crawl, serve_in_background
from crawlspace.store.reader import CrawlReader

pytestmark = pytest.mark.slow

MIN_DELAY = 0.05
SCALE = 1440.0  # an hour of the web's time in 2.5 s of the test's
LAG = 6 * 3600.0  # the mirrors serve their originals as they were six hours (15 s) before: longer than a refetch
NOTICE_DELAY = 2.0  # seconds an outdated notice may take: commit rounds of 0.5 s on both sides, the socket


def lagging_web() -> SimWeb:
    return SimWeb.generate(
        SimWebConfig(
            hosts=12, seed=21, mean_pages_per_host=6.0, max_pages_per_host=20, robots_crawl_delay=0.0,
            include_trap=False, duplicate_fraction=0.5, changing=True, time_scale=SCALE,
            change_epoch=float(int(time.time())), mirror_lag=LAG,
        )
    )  # fmt: skip


def test_a_mirror_with_a_changed_pages_old_content_is_not_its_duplicate_across_partitions(tmp_path: Path) -> None:
    web = lagging_web()
    mirrors = {urls[0]: [url for url in urls[1:] if "/mirror/" in url] for urls in web.duplicate_clusters().values()}
    with serve_in_background(web, tmp_path / "simweb", seeds=4) as running:
        config = CrawlConfig(
            min_delay=MIN_DELAY, allow_private_addresses=True, hosts_file=str(running.hosts_file), processes=2,
            max_seconds=40.0, refresh=True, max_rate=60.0, refresh_share=0.8, refresh_min_interval=0.5,
            refresh_max_interval=4.0, checkpoint_interval=5.0, table_fetch_versions=1000, refresh_weights="none",
        )  # fmt: skip
        Crawler(config, out=tmp_path / "crawl", seeds=running.seeds, progress=False).run()
        running.stop()
        log = running.read_log()
    verdict = judge_crawl(web, log, running.seeds, min_delay=MIN_DELAY)
    assert not verdict.disallowed and not verdict.host_overlaps and not verdict.delay_violations, verdict.summary()

    met: Counter[str] = Counter()
    stale: list[tuple[str, float, str | None]] = []
    with CrawlReader(tmp_path / "crawl") as reader:
        for original, copies in mirrors.items():
            history = sorted(reader.fetch_history(original), key=lambda fetch: fetch.fetched)
            history = [fetch for fetch in history if fetch.status == 200 and fetch.fingerprint is not None]
            for mirror in copies:
                for fetch in reader.fetch_history(mirror):
                    if fetch.status != 200 or fetch.outcome == "not-modified" or fetch.fingerprint is None:
                        continue
                    old_content = any(
                        other.fingerprint == fetch.fingerprint for other in history if other.fetched < fetch.fetched
                    )
                    known = [other for other in history if other.fetched <= fetch.fetched - NOTICE_DELAY]
                    recent = {
                        o.fingerprint for o in history if fetch.fetched - NOTICE_DELAY < o.fetched <= fetch.fetched
                    }
                    if not old_content or not known or known[-1].fingerprint == fetch.fingerprint:
                        continue
                    if fetch.fingerprint in recent:
                        continue  # the original had it again meanwhile
                    met["old content at a mirror"] += 1
                    if fetch.duplicate_of == original:
                        stale.append((mirror, fetch.fetched, fetch.duplicate_of))
    stats = json.loads((tmp_path / "crawl" / "stats.json").read_text())
    assert met["old content at a mirror"] >= 3, (met, stats["outdated_notices_sent"])
    assert stats["outdated_notices_sent"] > 0 and stats["outdated_entries_removed"] > 0, stats
    assert not stale, (
        f"{len(stale)} of {met['old content at a mirror']} judged duplicates of a replaced version: {stale[:3]}"
    )
