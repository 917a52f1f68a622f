"""A continuous crawl of the changing simulated web, judged from the server's log: pages refetched as
they change, conditional GETs answered 304 and stored as server-not-modified revisits, politeness and
robots.txt as in any crawl, the fetch-rate cap held, and a copy fresher than one crawl pass leaves."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from crawlspace.api import Crawler
from crawlspace.config import ConfigError, CrawlConfig
from crawlspace.refresh.schedule import RefreshSchedule
from crawlspace.simweb import SimWeb, SimWebConfig, judge_crawl, serve_in_background
from crawlspace.simweb.freshness import Freshness, crawl_freshness
from crawlspace.store.reader import CrawlReader
from crawlspace.store.warc import NOT_MODIFIED_PROFILE

pytestmark = pytest.mark.slow

MIN_DELAY = 0.05
MAX_RATE = 60.0
SECONDS = 25.0


def changing_web(*, hosts: int, seed: int, time_scale: float = 360.0) -> SimWeb:
    """A small changing web whose clock starts now, `time_scale` times faster than the test's (360: an
    hour in 10 s)."""
    return SimWeb.generate(
        SimWebConfig(
            hosts=hosts,
            seed=seed,
            mean_pages_per_host=6.0,
            max_pages_per_host=20,
            robots_crawl_delay=0.0,
            include_trap=False,
            changing=True,
            time_scale=time_scale,
            change_epoch=float(int(time.time())),
        )
    )


def test_a_continuous_crawl_refreshes_politely_within_its_rate(tmp_path: Path) -> None:
    web = changing_web(hosts=12, seed=4)
    with serve_in_background(web, tmp_path / "simweb", seeds=4) as running:
        config = CrawlConfig(
            min_delay=MIN_DELAY, allow_private_addresses=True, hosts_file=str(running.hosts_file), processes=1,
            max_seconds=SECONDS, refresh=True, max_rate=MAX_RATE, refresh_share=0.8, refresh_min_interval=0.5,
            refresh_max_interval=10.0, checkpoint_interval=2.0,
        )  # fmt: skip
        started = time.time()
        stats = Crawler(config, out=tmp_path / "crawl", seeds=running.seeds, progress=False).run()
        ended = time.time()
        running.stop()
        log = running.read_log()

    assert stats.termination == "max-seconds"  # a continuous crawl does not end by itself
    verdict = judge_crawl(web, log, running.seeds, min_delay=MIN_DELAY)
    assert not verdict.disallowed and not verdict.host_overlaps and not verdict.ip_overlaps, verdict.summary()
    assert not verdict.delay_violations, verdict.summary()
    assert not verdict.missing, verdict.summary()  # the first pass found everything, as a crawl does
    pages = [entry for entry in log if entry.path != "/robots.txt"]
    counts = Counter((entry.host, entry.path) for entry in pages)
    refetched = [key for key, count in counts.items() if count > 1]
    assert len(refetched) > len(counts) / 2, f"{len(refetched)} of {len(counts)} pages refetched"
    statuses = Counter(entry.status for entry in pages)
    assert statuses[304] > 0, statuses  # conditional GETs of unchanged pages
    # the rate cap, measured by the server over every second of the crawl
    per_second = Counter(int(entry.arrived - started) for entry in log)
    assert max(per_second.values()) <= MAX_RATE * 1.2 + 2, per_second.most_common(3)

    # fresher than the first pass alone would have left the copy
    window = (started + SECONDS / 2, ended - 1.0)
    first_only = [entry for entry in log if counts[(entry.host, entry.path)] >= 1]
    seen: set[tuple[str, str]] = set()
    first_pass = []
    for entry in first_only:
        if (entry.host, entry.path) not in seen:
            seen.add((entry.host, entry.path))
            first_pass.append(entry)
    kept = crawl_freshness(web, log, start=window[0], end=window[1])
    left = crawl_freshness(web, first_pass, start=window[0], end=window[1])
    assert kept.pages == left.pages > 0
    assert kept.freshness > left.freshness + 0.05, (kept, left)
    assert kept.age < left.age

    # what was stored: revisits for the 304s, the schedule, stats
    section = json.loads((tmp_path / "crawl" / "stats.json").read_text())["refresh"]
    answered = {(entry.host, entry.path) for entry in pages if entry.status == 200}
    assert section["not_modified"] == statuses[304] and section["scheduled_urls"] == len(answered)  # redirects: not
    profiles: Counter[str] = Counter()
    with CrawlReader(tmp_path / "crawl") as reader:
        for host, path in answered:
            url = web.origin(host) + path
            profiles.update(found.record.headers.get("warc-profile", "") for found in reader.records(url))
            history = reader.fetch_history(url)
            assert history and history[0].status == 200  # the stored copy's status, whatever the last answer
        outcomes = Counter(page.fetch.outcome for page in reader.pages())
    assert profiles[NOT_MODIFIED_PROFILE] == statuses[304]
    assert outcomes["not-modified"] > 0  # the stored copy is current: the table says so, and keeps the page


BEATS_SCALE = 1440.0  # an hour of the web's time in 2.5 s of the test's
BEATS_SECONDS = 25.0
BEATS_WARMUP = 10.0  # the first pass (discovery has a fifth of the budget) and the first refetches


def _timed_crawl(config: CrawlConfig, out: Path, seeds: list[str]) -> tuple[float, float]:
    """A crawl in a process of its own (for a process pool): when it started and ended."""
    started = time.time()
    Crawler(config, out=out, seeds=seeds, progress=False).run()
    return started, time.time()


def _judged_continuous_crawls(
    tmp_path: Path, policies: dict[str, dict[str, str]]
) -> dict[str, tuple[Freshness, int, float]]:
    """Continuous crawls of the same changing web, one per policy, at the same time: each in a process
    of its own against a server of its own (the same web, the same clock, so each meets the same
    changes at the same offsets, and the same load of the machine), politeness and robots.txt judged
    from each server's log; per policy its freshness after the warmup, the page fetches in that
    window, and the simulated seconds. The crawls are bound by time, not CPU (a few percent of a
    core each): side by side they take the wall time of one."""
    import concurrent.futures
    import contextlib
    import multiprocessing

    web = changing_web(hosts=12, seed=4, time_scale=BEATS_SCALE)
    with contextlib.ExitStack() as stack:
        servers = {
            name: stack.enter_context(serve_in_background(web, tmp_path / name / "simweb", seeds=4))
            for name in policies
        }
        pool = stack.enter_context(
            concurrent.futures.ProcessPoolExecutor(len(policies), mp_context=multiprocessing.get_context("spawn"))
        )
        configs = {
            name: CrawlConfig(
                min_delay=MIN_DELAY, allow_private_addresses=True, hosts_file=str(servers[name].hosts_file),
                processes=1, max_seconds=BEATS_SECONDS, refresh=True, max_rate=40.0, refresh_share=0.8,
                refresh_min_interval=0.5, refresh_max_interval=10.0, checkpoint_interval=5.0, delay_factor=1.0,
                concurrency=16, **policy,  # type: ignore[arg-type]
            )
            for name, policy in policies.items()
        }  # fmt: skip
        runs = {
            name: pool.submit(_timed_crawl, config, tmp_path / name / "crawl", servers[name].seeds)
            for name, config in configs.items()
        }
        times = {name: run.result() for name, run in runs.items()}
        logs = {}
        for name, running in servers.items():
            running.stop()
            logs[name] = running.read_log()
    judged = {}
    for name, log in logs.items():
        verdict = judge_crawl(web, log, servers[name].seeds, min_delay=MIN_DELAY)
        assert not verdict.disallowed and not verdict.host_overlaps and not verdict.ip_overlaps, verdict.summary()
        assert not verdict.delay_violations, verdict.summary()
        started, ended = times[name]
        window = (started + BEATS_WARMUP, ended)
        fetches = sum(1 for e in log if window[0] <= e.arrived < window[1] and e.path != "/robots.txt")
        judged[name] = (
            crawl_freshness(web, log, start=window[0], end=window[1]),
            fetches,
            (ended - started) * BEATS_SCALE,
        )
    return judged


def test_the_default_policy_keeps_the_copy_fresher_than_uniform_at_the_same_fetches(tmp_path: Path) -> None:
    """The issue's "done when": a continuous crawl of the changing simulated web for more than an hour of
    its time, polite and within robots.txt (the server's log says), fresher with the default policy
    (optimal, weighted by in-links) than with uniform refresh, the same budget spent by both.

    Longer than an hour (ten hours and more): in one hour the fastest pages of this web change about
    six times, too few for any estimate to tell them apart, so every policy would still be giving each
    page the even share it gives until a page has a history (refresher.EXPLORE) and the two crawls
    would be the same. What stays small is the margin, because most of the web does not change in a
    day: in the refresher driven by the change model alone (bench/refresh/model.py's loop, no engine)
    optimal is ahead of uniform by +0.020 to +0.031 on four seeds of this web at this budget; the
    crawls measured +0.008 and +0.011 (before the fix of the stranded leases, the default lost here
    by 0.02 to 0.04). The two crawls run side by side (`_judged_continuous_crawls`)."""
    judged = _judged_continuous_crawls(tmp_path, {"default": {}, "uniform": {"refresh_policy": "uniform"}})
    (default, default_fetches, simulated), (uniform, uniform_fetches, _) = judged["default"], judged["uniform"]
    assert simulated >= 3600.0
    assert default.pages == uniform.pages > 40  # the same pages judged: the whole web, found in the first pass
    # the same budget: the default spends no more of it (it may leave some: a page it wants every
    # half second waits for its host's turn), so a fresher copy is not bought with more fetches
    assert default_fetches <= 1.02 * uniform_fetches, (default_fetches, uniform_fetches)
    assert default_fetches >= 0.8 * uniform_fetches, (default_fetches, uniform_fetches)
    assert default.freshness > uniform.freshness, (default, uniform)  # (optimal is freshness's, not age's)


def test_a_continuous_crawl_in_two_processes_is_polite_and_keeps_the_global_rate(tmp_path: Path) -> None:
    """--processes 2: each partition refreshes its own hosts at its share of max_rate; together they
    stay within it (measured by the server over every second), one connection per host at a time."""
    rate, seconds = 30.0, 16.0
    web = changing_web(hosts=12, seed=5)
    with serve_in_background(web, tmp_path / "simweb", seeds=4) as running:
        config = CrawlConfig(
            min_delay=MIN_DELAY, allow_private_addresses=True, hosts_file=str(running.hosts_file), processes=2,
            max_seconds=seconds, refresh=True, max_rate=rate, refresh_share=0.8, refresh_min_interval=0.5,
            refresh_max_interval=10.0, checkpoint_interval=2.0,
        )  # fmt: skip
        started = time.time()
        stats = Crawler(config, out=tmp_path / "crawl", seeds=running.seeds, progress=False).run()
        running.stop()
        log = running.read_log()
    assert stats.termination == "max-seconds"
    verdict = judge_crawl(web, log, running.seeds, min_delay=MIN_DELAY)
    assert not verdict.disallowed and not verdict.host_overlaps and not verdict.ip_overlaps, verdict.summary()
    assert not verdict.delay_violations, verdict.summary()
    pages = [entry for entry in log if entry.path != "/robots.txt"]
    counts = Counter((entry.host, entry.path) for entry in pages)
    assert sum(1 for count in counts.values() if count > 1) > len(counts) / 2  # both partitions refresh
    per_second = Counter(int(entry.arrived - started) for entry in log)
    assert max(per_second.values()) <= rate * 1.2 + 2, per_second.most_common(3)  # all partitions together
    busy = [count for second, count in per_second.items() if 3 <= second < seconds - 1]
    assert sum(busy) / len(busy) > rate * 0.5, per_second  # the budget is used, not just respected
    workers = sorted((tmp_path / "crawl" / "workers").iterdir())
    assert len(workers) == 2
    for worker in workers:  # each partition kept a schedule of its own pages
        section = json.loads((worker / "stats.json").read_text())["refresh"]
        assert section["scheduled_urls"] > 0 and section["handed_out"] > 0, (worker, section)


def test_the_schedule_survives_a_kill_and_is_never_behind_the_journal(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    from tests.conftest import REPO

    web = changing_web(hosts=10, seed=6)
    out = tmp_path / "crawl"
    with serve_in_background(web, tmp_path / "simweb", seeds=4) as running:
        command = [
            sys.executable, "-m", "crawlspace", "crawl", str(running.seeds_file), "--out", str(out), "--no-progress",
            "--hosts-file", str(running.hosts_file), "--allow-private-addresses", "--min-delay", str(MIN_DELAY),
            "--processes", "1", "--continuous", "--max-rate", "40",
        ]  # fmt: skip
        process = subprocess.Popen(command, env=dict(os.environ, PYTHONPATH=str(REPO)), stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while len([e for e in running.read_log() if e.path != "/robots.txt"]) < 30 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(4.0)  # refetches begin, checkpoints pass
        killed_at = time.time()
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        running.stop()
        answered = [e for e in running.read_log() if e.path != "/robots.txt" and e.status in (200, 304)]
    # a page answered well before the kill was journaled as fetched: it must be scheduled again
    settled = {f"http://{e.host}{e.path}" for e in answered if e.finished < killed_at - 2.0}
    assert len(settled) >= 20
    with RefreshSchedule(out / "refresh") as schedule:
        scheduled = set(_urls(schedule))
    journaled = _journaled_fetches(out)
    assert not settled - scheduled, f"{len(settled - scheduled)} pages fetched before the kill are not scheduled"
    assert not journaled - scheduled, f"{len(journaled - scheduled)} pages journaled as fetched are not scheduled"


def _urls(schedule: RefreshSchedule) -> list[str]:
    return [item.url for item in schedule.take(float("inf"), 1_000_000, lease=0.0)]


def _journaled_fetches(out: Path) -> set[str]:
    from crawlspace.crawl.journal import FETCHED, replay

    urls: set[str] = set()
    for path in sorted((out / "journal").rglob("*")):
        if path.is_file():
            urls |= {event.url for event in replay(path) if event.kind == FETCHED and event.fields[0] in ("200", "304")}
    return urls


def test_a_continuous_crawl_needs_a_rate() -> None:
    with pytest.raises(ConfigError, match="needs max_rate"):
        CrawlConfig(refresh=True)


def test_a_page_journaled_as_fetched_is_already_in_the_schedule_on_disk(tmp_path: Path) -> None:
    """The schedule's writes go out before every journal write (the ledger's hook): a kill -9 right
    after the journal says a page was fetched finds its next refresh on disk (read by a second,
    read-only opener, as a resumed process would)."""
    import rocksdict

    from crawlspace.crawl.engine import CrawlEngine
    from crawlspace.fetch import FetchResult, Outcome
    from crawlspace.frontier import FrontierEntry
    from crawlspace.urls.fingerprint import url_fingerprint

    engine = CrawlEngine(
        CrawlConfig(refresh=True, max_rate=10.0, processes=1), tmp_path / "crawl", handle_signals=False
    )
    try:
        assert engine.refreshing is not None
        url = "http://a.test/page"
        result = FetchResult(url=url, outcome=Outcome.OK, status=200, headers=[("ETag", '"v1"')], started=time.time())
        engine.refreshing.fetched(result, FrontierEntry(url), fingerprint=7, retry=False)
        engine.ledger.fetched(url, 200, "2xx", 100)
        engine.ledger.flush()
        on_disk = rocksdict.Rdict(
            str(tmp_path / "crawl" / "refresh"), options=rocksdict.Options(raw_mode=True),
            access_type=rocksdict.AccessType.read_only(),
        )  # fmt: skip
        try:
            assert on_disk.get(b"u" + url_fingerprint(url).to_bytes(8, "big")) is not None
        finally:
            on_disk.close()
    finally:
        engine.close_unstarted()
