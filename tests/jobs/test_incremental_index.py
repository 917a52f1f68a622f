"""An index kept up to date over a continuing crawl ranks exactly as an index rebuilt from scratch.

A continuous crawl of the changing simulated web runs, the index is built; the crawl goes on
(refetching pages that changed, finding new ones, new anchor text) and one page is then found gone
(its newest fetch a 404); the index is updated, which adds segments and masks old copies, and
compared with a rebuild of the same crawl: the same documents, the same statistics, the same top 20
and scores to 1e-9 for queries drawn from the pages, with and without tiers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from crawlspace.api import Crawler
from crawlspace.config import CrawlConfig
from crawlspace.index import Index, tokenize
from crawlspace.jobs import run
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background
from crawlspace.store.crawltable import CrawlTable, FetchInfo
from crawlspace.store.rowkey import row_key
from tests.conftest import run_cli

pytestmark = pytest.mark.slow

JOBS = ["graph", "pagerank", "near", "index"]
OPTIONS: dict[str, Any] = {"shards": 3, "segment_docs": 40, "tier_cutoff": 1.0}


def changing_web() -> SimWeb:
    return SimWeb.generate(
        SimWebConfig(
            hosts=10, seed=6, mean_pages_per_host=8.0, max_pages_per_host=20, robots_crawl_delay=0.0,
            include_trap=False, changing=True, time_scale=2000.0, change_epoch=float(int(time.time())),
        )
    )  # fmt: skip


def live_documents(index: Index) -> dict[str, tuple[int, int]]:
    return {
        segment.url(doc): (number, doc)
        for number, (segment, searcher) in enumerate(zip(index.segments, index.searchers, strict=True))
        for doc in range(segment.docs)
        if searcher.live is None or searcher.live[doc]
    }


def queries_of(index: Index) -> list[str]:
    """Title words of pages, single words, disjunctions, phrases: drawn from the index's own pages."""
    titles = sorted({segment.title(doc) for segment in index.segments for doc in range(segment.docs)})
    words = sorted({word for title in titles for word in tokenize(title)})
    queries = [title for title in titles[:: max(1, len(titles) // 25)] if title]
    queries += words[:: max(1, len(words) // 25)]
    queries += [f"{a} OR {b}" for a, b in zip(words[::7], words[3::7], strict=False)][:15]
    queries += [f'"{title}"' for title in titles[1 :: max(1, len(titles) // 10)] if len(tokenize(title)) > 1]
    return queries


def test_an_updated_index_ranks_exactly_as_a_rebuild(tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    with serve_in_background(changing_web(), tmp_path / "simweb", seeds=4) as running:
        config = CrawlConfig(
            min_delay=0.01, delay_factor=0.0, allow_private_addresses=True, hosts_file=str(running.hosts_file),
            processes=1, max_seconds=5.0, refresh=True, max_rate=80.0, refresh_share=0.7,
            refresh_min_interval=0.3, refresh_max_interval=3.0,
        )  # fmt: skip
        Crawler(config, out=out, seeds=running.seeds, progress=False).run()
        first = run(out, only=JOBS, options={"index": OPTIONS})["index"]
        Crawler(config, out=out, seeds=running.seeds, progress=False).run()  # the crawl goes on

    with Index(out / "jobs" / "index") as index:
        gone = sorted(live_documents(index))[len(live_documents(index)) // 2]
    table = CrawlTable(out / "table")
    now = time.time()
    table.put_cells(
        row_key(gone),
        [("fetch", "", FetchInfo(status=404, outcome="ok", fetched=now, fetches=9, changes=1, first_fetched=now))],
        now,
    )
    table.close()

    updated = run(out, only=JOBS, options={"index": OPTIONS})["index"]
    rebuilt = run(out, out=tmp_path / "rebuilt", only=JOBS, options={"index": {**OPTIONS, "rebuild": True}})["index"]
    assert first["mode"] == "no previous index" and first["generation"] == 0
    assert updated["mode"] == "incremental" and updated["generation"] == 1
    assert rebuilt["mode"] == "rebuild asked for" and rebuilt["written"] == rebuilt["documents"]
    assert updated["written"] < rebuilt["written"]  # not a rebuild: unchanged pages kept their segments
    assert updated["kept"] > 0 and updated["masked"] > 0
    assert updated["masked_on_disk"] + updated["reclaimed"] >= updated["masked"]  # merges drop masked copies
    assert updated["documents"] == rebuilt["documents"] and updated["tiers"] == rebuilt["tiers"]
    assert updated["segments"] > first["segments"]
    assert len(updated["tiers"]) == 2  # the cutoff splits the pages

    with Index(out / "jobs" / "index") as incremental, Index(tmp_path / "rebuilt" / "jobs" / "index") as full:
        assert gone not in live_documents(incremental) and gone not in live_documents(full)
        assert sorted(live_documents(incremental)) == sorted(live_documents(full))
        assert incremental.stats.doc_count == full.stats.doc_count
        assert incremental.stats.field_totals == full.stats.field_totals
        assert dict(incremental.stats.items()) == dict(full.stats.items())
        queries = queries_of(full)
        assert len(queries) > 40
        compared = 0
        for query in queries:
            for tiers in (True, False):
                mine = incremental.search(query, 20, tiers=tiers)
                theirs = full.search(query, 20, tiers=tiers)
                assert [h.url for h in mine.hits] == [h.url for h in theirs.hits], query
                for a, b in zip(mine.hits, theirs.hits, strict=True):
                    assert a.score == pytest.approx(b.score, rel=1e-9, abs=1e-9)
                    assert a.group == b.group
                assert mine.tiers_searched == theirs.tiers_searched
                compared += len(mine.hits)
        assert compared > 200


def test_the_index_command_updates_and_rebuilds(tmp_path: Path) -> None:
    """`crawlspace index` is the index job: a second run over an unchanged crawl writes nothing."""
    from tests.jobs.test_jobs_e2e import crawl
    from tests.store.test_duplicates_e2e import WEB

    directory, _ = crawl(SimWeb.generate(WEB.replace(hosts=6)), tmp_path, 1)

    def index(*options: str) -> dict[str, Any]:
        done = run_cli("index", str(directory), *options)
        assert done.returncode == 0, done.stderr
        summary: dict[str, Any] = json.loads(done.stdout)["index"]
        return summary

    built, again = index("--shards", "2"), index("--shards", "2")
    other, forced = index("--shards", "3"), index("--shards", "3", "--rebuild")
    assert built["documents"] == built["written"] > 20 and built["mode"] == "no previous index"
    assert again["mode"] == "incremental" and again["written"] == 0 and again["kept"] == built["documents"]
    assert other["mode"] == "the previous index has 2 shards, not 3" and other["written"] == built["documents"]
    assert forced["mode"] == "rebuild asked for" and forced["generation"] == 0
    segment = sorted((directory / "jobs" / "index").resolve().rglob("*.seg"))[0]
    segment.write_bytes(segment.read_bytes()[:-10])  # a damaged previous index: rebuilt, nothing lost
    repaired = index("--shards", "3")
    assert repaired["mode"].startswith("previous index unreadable (") and "truncated" in repaired["mode"]
    assert repaired["documents"] == repaired["written"] == built["documents"]
