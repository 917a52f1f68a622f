"""Crawls for the dashboard's tests: the hostile site's (payloads everywhere), crawled once per module."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import pytest

from crawlspace.api import Crawler
from crawlspace.config import CrawlConfig
from tests.distributed.conftest import redis_server  # noqa: F401  (the cluster tests' fixture, for test_nodes)
from tests.serve.hostile import hostile_site


def crawl_hostile_site(out: Path) -> None:
    """Crawl it on a thread of its own: a browser test's Playwright holds an event loop on this one."""
    with hostile_site() as base, concurrent.futures.ThreadPoolExecutor(1) as thread:
        config = CrawlConfig(
            allow_private_addresses=True, min_delay=0.0, processes=1, progress_interval=0.2, max_pages=20
        )
        thread.submit(Crawler(config, out=out, seeds=[base], progress=False).run).result()


@pytest.fixture(scope="module")
def hostile_crawl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "crawl"
    crawl_hostile_site(out)
    return out
