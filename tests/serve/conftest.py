"""Crawls for the dashboard's tests: the hostile site's (payloads everywhere), crawled once per module."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlspace.api import Crawler
from crawlspace.config import CrawlConfig
from tests.serve.hostile import hostile_site


def crawl_hostile_site(out: Path) -> None:
    with hostile_site() as base:
        config = CrawlConfig(
            allow_private_addresses=True, min_delay=0.0, processes=1, progress_interval=0.2, max_pages=20
        )
        Crawler(config, out=out, seeds=[base], progress=False).run()


@pytest.fixture(scope="module")
def hostile_crawl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "crawl"
    crawl_hostile_site(out)
    return out
