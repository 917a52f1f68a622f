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
from crawlspace.refresh.experience import (
    FLOOR,
    IMPACT_FLOOR,
    IMPACT_PRIOR,
    UserExperienceWeights,
    impression,
)
from crawlspace.refresh.querylog import QueryLogTail, QueryLogWriter, read_query_log
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
        # every other one, of those whose stored versions show a change: the logged query of each is its
        # title and a word its change brought, a query the change moved it into (the policy weighs a page by
        # how much its past changes moved the results; the simulated web's changes leave titles be, so a
        # query of the title alone is one no change moves)
        logged = _queries_moved_by_a_change(out, titles, ordered[0::2])
        targets = list(logged)
        queries = tmp_path / "queries.txt"
        queries.write_text("".join(f"{logged[url]}\n" for url in targets) * 3, encoding="utf-8")
        with Index(out / "jobs" / "index") as index:
            shown = {hit.url for url in targets for hit in index.search(logged[url], 10).hits}
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
        _check_impacts_of_stored_versions(out, titles, targets, tmp_path)

        second_run = time.time()
        _crawl(out, running.hosts_file, running.seeds, resume=True, max_seconds=26.0, max_rate=16.0,
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
    print(f"{len(pairs)} pairs: shown pages requested {shown_requests} times, pages changing alike {alike_requests}")
    assert shown_requests >= 2 * max(alike_requests, 3), (shown_requests, alike_requests, requests)
    section = json.loads((out / "stats.json").read_text())["refresh"]["user_experience"]
    assert section["index"] == "ok" and section["computations"] >= 5 and section["weighted_pages"] >= len(targets)
    # the crawl measured the impact of the shown pages' changes from their stored versions
    assert section["history"] == "ok" and section["impact_measured_total"] >= 1, section


def _queries_moved_by_a_change(out: Path, titles: dict[str, str], urls: list[str]) -> dict[str, str]:
    """For each of `urls` whose stored versions differ: its title as a phrase and a word that its newest
    version has and its oldest had not."""
    from crawlspace.index import tokenize

    queries = {}
    with CrawlReader(out) as reader:
        for url in urls:
            versions = reader.versions(url)
            brought = set(tokenize(versions[0].text)) - set(tokenize(versions[-1].text)) if len(versions) > 1 else set()
            if brought:
                queries[url] = f'"{titles[url]}" {min(brought)}'
    return queries


def _check_impacts_of_stored_versions(out: Path, titles: dict[str, str], urls: list[str], tmp_path: Path) -> None:
    """On the first run's crawl (its versions parsed back from the WARC files): a changed page, logged
    under a query of its title and a word its change brought, moved for it (the earlier version did
    not have the word: not shown); under its title alone (the changes leave titles be) it moved less."""
    from crawlspace.index import tokenize

    with CrawlReader(out) as reader:
        for url in sorted(urls):  # pages of their own (a mirror's hits collapse into its original's)
            versions = reader.versions(url)
            if len(versions) < 2:
                continue
            brought = set(tokenize(versions[0].text)) - set(tokenize(versions[-1].text))
            if brought:
                word = min(brought)
                break
        else:
            raise AssertionError("no page with a changed version stored")
    impacts = {}
    for name, query in (("moved", f'"{titles[url]}" {word}'), ("title", f'"{titles[url]}"')):
        log = tmp_path / f"{name}-queries.txt"
        log.write_text(query + "\n", encoding="utf-8")
        weights = UserExperienceWeights(out / "jobs" / "index", log, crawl_dir=out)
        weights.compute()
        impacts[name] = weights.impacts[url]
    assert impacts["moved"] > max(impacts["title"], IMPACT_FLOOR), (url, word, impacts)


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
    cases = ((tmp_path / "no-such-dir" / "queries.txt", "cannot open"), (tmp_path, "directory"))
    for number, (unusable, said) in enumerate(cases):
        config = CrawlConfig(
            refresh=True, max_rate=10.0, refresh_policy="user-experience", refresh_query_log=str(unusable),
            processes=1,
        )  # fmt: skip
        with pytest.raises(ConfigError, match=f"refresh_query_log: .*{said}"):
            Crawler(config, out=tmp_path / f"crawl{number}", seeds=["http://a.test/"], progress=False).run()
    # a log that is not there yet is created, empty, for the dashboard to append to
    from crawlspace.crawl.engine import CrawlEngine

    created = tmp_path / "created.txt"
    config = CrawlConfig(
        refresh=True, max_rate=10.0, refresh_policy="user-experience", refresh_query_log=str(created), processes=1
    )
    engine = CrawlEngine(config, tmp_path / "crawl", handle_signals=False)
    try:
        assert created.read_bytes() == b""
        assert engine.refreshing is not None and engine.refreshing.refresher.experience is not None
        assert engine.refreshing.refresher.experience.crawl_dir == tmp_path / "crawl"
    finally:
        engine.close_unstarted()


def _versioned_crawl(directory: Path, pages: dict[str, list[tuple[str, str]]]) -> None:
    """A crawl table holding each page's versions (title, text), oldest first, one fetch per version."""
    from crawlspace.store.crawltable import CrawlTable, FetchInfo
    from crawlspace.store.rowkey import row_key

    with CrawlTable(directory / "table") as table:
        for url, versions in pages.items():
            for number, (title, text) in enumerate(versions):
                at = 1_000_000.0 + 100.0 * number
                info = FetchInfo(
                    status=200, outcome="ok", fetched=at, fetches=number + 1, changes=number, first_fetched=1_000_000.0
                )
                table.put_cells(
                    row_key(url), [("fetch", "", info), ("title", "", title), ("content", "text", text)], at
                )
        table.commit()


def test_a_page_whose_changes_move_it_for_a_logged_query_outweighs_one_shown_alike_with_cosmetic_changes(
    tmp_path: Path,
) -> None:
    """Seed 004's impact: both pages are the first result of a query logged three times (the same
    impressions); one of them only came to rank for it with its last change, the other's changes were
    to words no query has. A page never seen to change keeps the prior; one whose stored versions all
    rank alike gets the floor, not zero."""
    from crawlspace.index import IndexDocument, build_index

    filler = "the quick brown fox jumps over the lazy dog " * 3
    current = {
        "http://moved.test/": ("garden notes", "roses roses and more roses " + filler),
        "http://cosmetic.test/": ("garden notes", "tulips tulips and more tulips lorem " + filler),
        "http://steady.test/": ("garden notes", "orchids in the greenhouse " + filler),
        "http://other.test/": ("other notes", "roses once tulips once orchids once " + filler),
    }
    build_index([IndexDocument(url, *fields) for url, fields in current.items()], tmp_path / "index", shards=1)
    crawl = tmp_path / "crawl"
    _versioned_crawl(
        crawl,
        {
            "http://moved.test/": [
                ("garden notes", "daisies and more daisies " + filler),
                current["http://moved.test/"],
            ],
            "http://cosmetic.test/": [
                ("garden notes", "tulips tulips and more tulips ipsum " + filler),
                ("garden notes", "tulips tulips and more tulips dolor " + filler),
                current["http://cosmetic.test/"],
            ],
            "http://steady.test/": [current["http://steady.test/"]],
            "http://other.test/": [current["http://other.test/"]],
        },
    )
    log = tmp_path / "queries.txt"
    log.write_text("roses\ntulips\norchids\n" * 3, encoding="utf-8")
    weights = UserExperienceWeights(tmp_path / "index", log, crawl_dir=crawl)
    found, stats = weights.compute()
    with Index(tmp_path / "index") as index:
        firsts = {query: index.search(query, 10).hits[0].url for query in ("roses", "tulips", "orchids")}
    assert firsts == {
        "roses": "http://moved.test/",
        "tulips": "http://cosmetic.test/",
        "orchids": "http://steady.test/",
    }
    # from not shown to the first result: moved by a first place's whole impression, its one change
    assert weights.impacts["http://moved.test/"] == pytest.approx(1.0)
    assert weights.impacts["http://cosmetic.test/"] == IMPACT_FLOOR  # two changes, neither moved it
    assert weights.impacts["http://steady.test/"] == IMPACT_PRIOR  # one version: nothing to measure yet
    assert found["http://moved.test/"] == pytest.approx(3 * impression(1) * 1.0)
    assert found["http://cosmetic.test/"] == pytest.approx(3 * impression(1) * IMPACT_FLOOR)
    assert found["http://moved.test/"] > found["http://steady.test/"] > found["http://cosmetic.test/"] > 0
    assert stats["impact_measured"] == 2 and stats["impact_pending"] == 0 and stats["impact_moved"] == 1
    assert stats["history"] == "ok"
    # measured once: the next computation reuses it (no change since), and a budget of one page a
    # computation leaves the rest for later
    again, stats_again = weights.compute()
    assert again == found and stats_again["impact_measured"] == 0
    weights.install(found, stats)
    weights.install(again, stats_again)  # the crawl's count stays what all its computations measured
    assert weights.stats["impact_measured"] == 0 and weights.stats["impact_measured_total"] == 2
    budgeted = UserExperienceWeights(tmp_path / "index", log, crawl_dir=crawl, impact_pages=1)
    _, stats = budgeted.compute()
    assert stats["impact_measured"] == 1 and stats["impact_pending"] == 1
    # no crawl table yet: impressions with the prior's impact, and why
    tableless = UserExperienceWeights(tmp_path / "index", log, crawl_dir=tmp_path / "no-crawl")
    found, stats = tableless.compute()
    assert str(stats["history"]).startswith("none") and set(tableless.impacts.values()) == {IMPACT_PRIOR}


def test_the_query_log_is_read_as_it_grows_and_malformed_lines_are_counted_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "queries.txt"
    path.write_bytes(b"apple\n\xff\xfe not utf-8\nbell\x07 ringing\n" + b"x" * 5000 + b"\n  apple  \npear")
    tail = QueryLogTail(path)
    assert tail.read() == {"apple": 2, "pear": 1}  # the last line, without its newline, counts while it stays so
    assert tail.malformed == 3 and tail.lines == 2
    with path.open("ab") as grown:
        grown.write(b" tart\nplum\n" + b"y" * 20_000)  # the unterminated line grew; an overlong one begins
    assert tail.read() == {"apple": 2, "pear tart": 1, "plum": 1}
    with path.open("ab") as grown:
        grown.write(b"y" * 3_000_000 + b"\nfig\n")  # it ends: one malformed line, held in no buffer
    assert tail.read() == {"apple": 2, "pear tart": 1, "plum": 1, "fig": 1} and tail.malformed == 4
    path.write_text("kiwi\n", encoding="utf-8")  # replaced by a shorter log: read from its start
    assert tail.read() == {"kiwi": 1} and tail.restarts == 1


def test_the_dashboard_s_log_line_cannot_be_broken_by_a_query(tmp_path: Path) -> None:
    path = tmp_path / "queries.txt"
    writer = QueryLogWriter(path)
    assert writer.append("first\nsecond\r\nthird\u2028fourth\x00fifth\x85")
    assert writer.append('"a phrase"  -excluded')
    assert not writer.append("   \n ") and not writer.append("z" * 1001) and not writer.append("lone \ud800")
    writer.close()
    assert path.read_text(encoding="utf-8").splitlines() == ["first second third fourth fifth", '"a phrase" -excluded']
    assert read_query_log(path) == {"first second third fourth fifth": 1, '"a phrase" -excluded': 1}
