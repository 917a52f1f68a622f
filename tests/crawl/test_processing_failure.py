"""A fetched page whose processing raises (a bug, a store or a peer that failed) is fetched again later
and its links followed then; one that always fails is given up after the retry budget. It used to be
released as done: the URL finished with its links never followed, and every page only they led to was
lost without a trace but an `internal:` count."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from crawlspace.config import CrawlConfig
from crawlspace.crawl import CrawlEngine
from crawlspace.simweb import RunningServer, SimWeb, judge_crawl

MIN_DELAY = 0.02


def crawl_with_failing_recorder(
    served: RunningServer, out: Path, failures: dict[str, int], *, in_content_check: bool = False, **options: Any
) -> CrawlEngine:
    """A crawl whose recorder raises for the URLs of `failures`, that many times each: as it records the
    page, or (`in_content_check`) as it is asked whether the page's content is checked, before the claim
    of a crawl of several partitions or a refreshing one."""
    config = CrawlConfig(
        **{
            "min_delay": MIN_DELAY,
            "hosts_file": str(served.hosts_file),
            "allow_private_addresses": True,
            "max_retries": 2,
            "retry_delay": 0.05,
            "max_seconds": 90,
            **options,
        }
    )
    engine = CrawlEngine(config, out, live_progress=False, handle_signals=False)
    left = Counter(failures)
    name = "content_checked" if in_content_check else "record"
    original = getattr(engine.recorder, name)

    def failing(result: Any, *arguments: Any, **keywords: Any) -> Any:
        if left[result.url] > 0:
            left[result.url] -= 1
            raise RuntimeError(f"injected failure of {result.url}")
        return original(result, *arguments, **keywords)

    setattr(engine.recorder, name, failing)
    engine.add_seeds(served.seeds)
    asyncio.run(engine.run())
    served.stop()
    return engine


def test_a_page_whose_processing_failed_once_is_fetched_again_and_its_links_followed(
    small_web: SimWeb, served_small_web: RunningServer, tmp_path: Path
) -> None:
    seeds = served_small_web.seeds[:2]
    engine = crawl_with_failing_recorder(served_small_web, tmp_path / "crawl", dict.fromkeys(seeds, 1))
    verdict = judge_crawl(small_web, served_small_web.read_log(), served_small_web.seeds, min_delay=MIN_DELAY)
    assert not verdict.missing, verdict.summary()  # the seeds' links were followed on the second fetch
    assert set(verdict.refetched) == set(seeds), verdict.summary()
    assert not verdict.host_overlaps and not verdict.delay_violations, verdict.summary()
    assert engine.stats.errors["internal:RuntimeError"] == 2
    assert engine.stats.termination == "frontier-empty"


def test_a_page_that_always_fails_is_given_up_after_the_retries(
    small_web: SimWeb, served_small_web: RunningServer, tmp_path: Path
) -> None:
    seed = served_small_web.seeds[0]
    engine = crawl_with_failing_recorder(served_small_web, tmp_path / "crawl", {seed: 100})
    fetches = Counter((entry.host.split(":")[0].lower(), entry.path) for entry in served_small_web.read_log())
    parts = urlsplit(seed)
    assert fetches[(parts.hostname, parts.path or "/")] == 3  # the first attempt and max_retries=2 more
    assert engine.stats.errors["internal:RuntimeError"] == 3
    assert engine.stats.errors["gave-up-after-internal-errors"] == 1
    assert engine.stats.termination == "frontier-empty"


def test_a_page_whose_content_check_failed_before_the_claim_is_fetched_again(
    small_web: SimWeb, served_small_web: RunningServer, tmp_path: Path
) -> None:
    """The failure comes before the recording, where the content claim of a cluster's partition is made
    (here a refreshing crawl, which asks too): it used to escape the processing's handling, leave the
    page's lease held and end the worker."""
    seeds = served_small_web.seeds[:2]
    engine = crawl_with_failing_recorder(
        served_small_web, tmp_path / "crawl", dict.fromkeys(seeds, 1), in_content_check=True,
        refresh=True, refresh_share=0.1, max_seconds=12, max_rate=300.0,
    )  # fmt: skip
    verdict = judge_crawl(small_web, served_small_web.read_log(), served_small_web.seeds, min_delay=MIN_DELAY)
    assert not verdict.missing, verdict.summary()
    assert not verdict.host_overlaps and not verdict.delay_violations, verdict.summary()
    assert engine.stats.errors["internal:RuntimeError"] == 2
