"""Near-duplicates across partitions, end to end: a crawl of the simulated web by two processes finds
the same near-duplicate pairs as a crawl by one, although some pairs (8 of 48) have their two pages on
hosts of different partitions (issue 16, "content seen across nodes"). Judged against the simulated
web's ground truth (`SimWeb.near_duplicate_of`) from the content sets the crawls leave, and from the
WARC files: with near-duplicates not stored, exactly one page of each pair is stored in full.

Also over the in-memory transport (two engines in one loop, tests/distributed/memory_peers.py): a
question that is never answered is counted in `near_duplicate_unanswered` and the page taken as new,
and the crawl goes on.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastwarc.warc import ArchiveIterator, WarcRecordType

from crawlspace.api import Crawler
from crawlspace.config import CrawlConfig
from crawlspace.crawl.workers import worker_directory
from crawlspace.seen import ContentKind, ContentSeen
from crawlspace.simweb import RunningServer, SimWeb, SimWebConfig, judge_crawl, serve_in_background
from crawlspace.simweb.generator import unescape_unreserved
from tests.crawl.test_recovery import crash, finish, start
from tests.distributed.memory_peers import MemoryNetwork
from tests.distributed.test_memory_peers import crawl_two

WEB = SimWebConfig(
    hosts=40,
    seed=11,
    mean_pages_per_host=10,
    duplicate_fraction=0.05,
    near_duplicate_fraction=0.15,
    robots_crawl_delay=0.0,
    include_trap=False,
)

Pair = frozenset[str]


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb.generate(WEB)


def true_pairs(web: SimWeb, fetched: set[str]) -> set[Pair]:
    """The simulated web's near-copies whose original was fetched too."""
    return {
        frozenset((url, original))
        for url in fetched
        if (original := web.near_duplicate_of(url)) is not None and original in fetched
    }


def found_pairs(directories: list[Path]) -> tuple[set[Pair], dict[str, int], dict[str, ContentKind]]:
    """The near-duplicate relation the crawl's content sets recorded, which partition fetched each URL,
    and each URL's verdict."""
    pairs: set[Pair] = set()
    partition_of: dict[str, int] = {}
    kinds: dict[str, ContentKind] = {}
    for index, directory in enumerate(directories):
        content = ContentSeen(directory / "seen" / "content")
        for url in content.urls():
            partition_of[url] = index
            verdict = content.verdict_of(url)
            assert verdict is not None
            kinds[url] = verdict.kind
            if verdict.kind is ContentKind.NEAR:
                assert verdict.of_url is not None, url  # named, also when another partition fetched it
                pairs.add(frozenset((url, verdict.of_url)))
        content.close()
    return pairs, partition_of, kinds


def full_responses(crawl: Path) -> set[str]:
    stored: set[str] = set()
    for path in (crawl / "warc").glob("*.warc.gz"):
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream, record_types=WarcRecordType.response):
                stored.add(record.headers["WARC-Target-URI"])
    return stored


def crawl(web: SimWeb, directory: Path, processes: int) -> tuple[set[Pair], set[Pair], dict[str, int], Path]:
    out = directory / "crawl"
    with serve_in_background(web, directory / "server", seeds=4) as server:
        config = CrawlConfig(
            min_delay=0.0, delay_factor=0.0, concurrency=16, allow_private_addresses=True,
            hosts_file=str(server.hosts_file), processes=processes, max_seconds=120.0,
            store_near_duplicates=False,
            # hosts owned by their name's hash, not their address's: the server takes a free 127.R.x.y
            # each run, and with per-IP ownership how many pairs fall across the partitions changed with R
            per_ip=False,
        )  # fmt: skip
        stats = Crawler(config, out=out, seeds=server.seeds, progress=False).run()
        server.stop()
        verdict = judge_crawl(web, server.read_log(), server.seeds)
    assert stats.termination == "frontier-empty"
    assert not verdict.missing and not verdict.refetched, verdict.summary()
    fetched = {url for url in verdict.fetched if web.status(url) == 200}
    partitions = [worker_directory(out, index) for index in range(processes)] if processes > 1 else [out]
    found, partition_of, kinds = found_pairs(partitions)
    totals = json.loads((out / "stats.json").read_text())
    assert totals["near_duplicate_content"] == sum(kind is ContentKind.NEAR for kind in kinds.values())
    assert totals["near_duplicate_unanswered"] == 0
    stored = full_responses(out)
    for pair in found:  # the later page of each pair is not stored, its original is
        assert len(pair & stored) == 1, sorted(pair)
    return found, true_pairs(web, fetched), partition_of, out


def test_two_processes_find_the_near_duplicates_one_finds_across_their_partitions(web: SimWeb, tmp_path: Path) -> None:
    single, truth, _, _ = crawl(web, tmp_path / "one", processes=1)
    started = time.monotonic()
    double, truth_double, partition_of, _ = crawl(web, tmp_path / "two", processes=2)
    assert time.monotonic() - started < 90  # no question waited out its timeout
    assert truth_double == truth and len(truth) >= 30
    assert single == truth  # one process: every near-copy whose original was fetched
    across = {pair for pair in truth if len({partition_of[url] for url in pair}) == 2}
    assert len(across) >= 5, (len(across), len(truth))  # 8 of the 48 pairs fall across the partitions here
    # the race the design accepts (nearclaims): two pages asked within moments of each other may
    # both be stored as originals, never both called near-duplicates; it is rare enough here
    missed = truth - double
    assert double <= truth and len(missed) <= 1, sorted(map(sorted, missed))


def started_crawling(out: Path, process: subprocess.Popen[str], timeout: float = 60.0) -> None:
    """Wait until both partitions have written their first checkpoint (a kill before it leaves no crawl to resume)."""
    deadline = time.monotonic() + timeout
    states = [worker_directory(out, index) / "frontier" / "frontier.state" for index in range(2)]
    while not all(state.exists() for state in states) and process.poll() is None:
        assert time.monotonic() < deadline, "the crawl did not start"
        time.sleep(0.05)


def test_kill_nine_and_resume_keeps_the_owners_band_tables(web: SimWeb, tmp_path: Path) -> None:
    """The owners' share of the band table is checkpointed with the content set: after kill -9 of the
    whole crawl at random moments and resumes, pages fetched after a kill are still found near-duplicates
    of originals fetched before it, no page is named a near-duplicate of its own near-duplicate, and
    with near-duplicates not stored one page of every pair is stored in full. (A kill loses what the
    content sets recorded since their last checkpoint, exact and near alike, while the journal keeps
    those pages fetched: a relation with such a page is not found, so pairs may be missed, none invented.)"""
    out = tmp_path / "crawl"
    config = tmp_path / "crawl.toml"
    config.write_text("checkpoint_interval = 0.5\nprogress_interval = 0.1\nstore_near_duplicates = false\n")
    rng = random.Random(5)
    kill_times: list[float] = []
    with serve_in_background(web, tmp_path / "server", seeds=4) as server:
        arguments = [
            str(server.seeds_file), "--out", str(out), "--hosts-file", str(server.hosts_file),
            "--allow-private-addresses", "--min-delay", "0.3", "--concurrency", "8", "--processes", "2",
            "--config", str(config),
        ]  # fmt: skip
        process = start(*arguments)
        while len(kill_times) < 3:
            started_crawling(out, process)  # however slow a loaded machine starts it
            time.sleep(rng.uniform(2.0, 3.0))
            if process.poll() is not None:
                break
            crash(process)
            kill_times.append(time.time())
            process = start("--resume", str(out))
        finish(process)
        server.stop()
        log = server.read_log()
        verdict = judge_crawl(web, log, server.seeds, min_delay=0.3)
    assert len(kill_times) == 3, f"the crawl ended after {len(kill_times)} kills: make the web bigger"
    assert not verdict.missing, verdict.summary()
    truth = true_pairs(web, {url for url in verdict.fetched if web.status(url) == 200})
    found, _, kinds = found_pairs([worker_directory(out, index) for index in range(2)])
    print(f"kills {len(kill_times)}: {len(found)} near-duplicate pairs found of {len(truth)}")
    # no relation invented; a copy whose exact relation a kill lost (the fingerprint's owner rolled back
    # further than the band keys' owners) is found a near-duplicate of similarity 1 instead
    copies = {pair for pair in found - truth if len({web.duplicate_cluster(url) for url in pair} - {None}) == 1}
    assert found - copies <= truth, sorted(map(sorted, found - copies - truth))
    stored = full_responses(out)
    for pair in found:  # never a near-duplicate of its own near-duplicate
        near = [url for url in pair if kinds.get(url) is ContentKind.NEAR]
        assert len(near) == 1, sorted(pair)
        (original,) = pair - set(near)
        # the original is NEW in its content set, or its record was among those a kill rolled back (the
        # journal kept its page fetched and stored): then its response must be in the WARC files
        assert kinds.get(original, ContentKind.NEW) is ContentKind.NEW, sorted(pair)
        assert original in kinds or original in stored, sorted(pair)
    unstored = [sorted(pair) for pair in truth if not pair & stored]
    assert not unstored, unstored  # one page of every pair, at least, is stored in full
    fetched_at = {  # the last fetch of each URL, named as the judge names it
        web.origin(entry.host.rsplit(":", 1)[0].lower()) + unescape_unreserved(entry.path): entry.arrived
        for entry in log
        if entry.path != "/robots.txt"
    }
    times = [sorted(fetched_at[url] for url in pair) for pair in found if pair <= fetched_at.keys()]
    across_kills = [(first, last) for first, last in times if any(first < kill < last for kill in kill_times)]
    assert across_kills, f"no pair found across a kill ({len(found)} of {len(truth)} found)"


# -- two engines in one loop, over the in-memory transport ------------------------------------------------


@pytest.fixture
def served(web: SimWeb, tmp_path: Path) -> Iterator[RunningServer]:
    with serve_in_background(web, tmp_path / "simweb", seeds=4) as running:
        yield running


@pytest.mark.parametrize("unanswered", [0, 3])
def test_engines_in_one_loop_ask_the_owners_and_count_the_questions_left_unanswered(
    web: SimWeb, served: RunningServer, tmp_path: Path, unanswered: int
) -> None:
    network = MemoryNetwork(unanswered_near=unanswered)
    out = tmp_path / "crawl"
    engines = asyncio.run(crawl_two(served, out, network))
    served.stop()
    verdict = judge_crawl(web, served.read_log(), served.seeds, min_delay=0.02)
    assert not verdict.missing and not verdict.refetched, verdict.summary()  # the crawl went on
    truth = true_pairs(web, {url for url in verdict.fetched if web.status(url) == 200})
    found, partition_of, _ = found_pairs([out / "0", out / "1"])
    assert sum(engine.stats.near_duplicate_unanswered for engine in engines) == unanswered
    assert network.counts["near questions unanswered"] == unanswered
    assert network.counts["near questions"] > 0  # the owners were asked across the partitions
    assert sum(engine.stats.near_duplicate_content for engine in engines) == len(found)
    assert found <= truth
    across = {pair for pair in found if len({partition_of[url] for url in pair}) == 2}
    assert across, "no near-duplicate pair found across the partitions"
    # an unanswered owner may hide the original: at most one pair lost per unanswered question
    assert len(truth) - unanswered <= len(found), (len(found), len(truth))
    if not unanswered:
        assert found == truth
