"""The changing simulated web: content a pure function of (seed, page, time), Poisson changes at the
rates drawn, Last-Modified, ETag and 304 over HTTP, news URLs that appear with their version, and the
freshness judge against Cho & Garcia-Molina's formula."""

from __future__ import annotations

import asyncio
import math
from email.utils import formatdate
from pathlib import Path

import numpy as np
import pytest

from crawlspace.refresh.policies import freshness
from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.simweb.changes import DAY, Kind
from crawlspace.simweb.config import SimWebConfigError
from crawlspace.simweb.freshness import crawl_freshness
from crawlspace.simweb.server import LogEntry, SimServer, read_log
from tests.simweb.test_simweb_server import PORT, path_of, request, run

EPOCH = 1_700_000_000.0
CONFIG = SimWebConfig(hosts=30, seed=21, changing=True, time_scale=60.0, change_epoch=EPOCH, port=PORT)


@pytest.fixture(scope="module")
def changing() -> SimWeb:
    return SimWeb.generate(CONFIG)


def pages_of(web: SimWeb, kind: int) -> list[int]:
    assert web.changes is not None
    return [page for page in range(web.data.pages) if web.changes.kind_and_rate(page)[0] == kind]


def test_rates_are_heavy_tailed(changing: SimWeb) -> None:
    assert changing.changes is not None
    kinds = [changing.changes.kind_and_rate(page)[0] for page in range(changing.data.pages)]
    shares = {kind: kinds.count(kind) / len(kinds) for kind in (Kind.STATIC, Kind.SLOW, Kind.FAST, Kind.SPAM)}
    assert 0.25 < shares[Kind.STATIC] < 0.45 and 0.4 < shares[Kind.SLOW] < 0.6
    assert 0.08 < shares[Kind.FAST] < 0.25 and 0 < shares[Kind.SPAM] < 0.04
    fast = [changing.changes.kind_and_rate(page)[1] for page in pages_of(changing, Kind.FAST)]
    assert min(fast) >= 1 / DAY and max(fast) <= 1 / 600.0


def test_content_is_a_pure_function_of_seed_page_and_time(changing: SimWeb) -> None:
    again = SimWeb.generate(CONFIG)
    assert changing.changes is not None
    page = pages_of(changing, Kind.FAST)[0]
    url = changing.url_of(page)
    moments = [EPOCH - 10.0, EPOCH, *np.linspace(EPOCH + 1, EPOCH + 3 * DAY / 60, 40).tolist()]
    versions = [changing.version_at(url, at) for at in moments]
    assert versions == [again.version_at(url, at) for at in moments]
    assert versions[0] is not None and versions[0].number == 0
    numbers = [version.number for version in versions if version is not None]
    assert numbers == sorted(numbers) and numbers[-1] > 0  # versions grow with time
    for at, version in zip(moments, versions, strict=True):
        assert version is not None
        assert changing.body(url, at) == again.body(url, at)
        assert version.changed_at <= max(at, EPOCH)
    assert changing.body(url, moments[0]) == SimWeb.generate(CONFIG.replace(changing=False)).body(url)  # version 0
    same, later = changing.body(url, moments[-1]), changing.body(url, moments[-1] + 0.001)
    changed = changing.version_at(url, moments[-1]) != changing.version_at(url, moments[-1] + 0.001)
    assert (same != later) == changed
    static = changing.url_of(pages_of(changing, Kind.STATIC)[0])
    assert changing.body(static, EPOCH) == changing.body(static, EPOCH + 1e6)


def test_changes_are_poisson_at_the_drawn_rate(changing: SimWeb) -> None:
    """Counted with next_change over a long horizon: the number of changes of each fast page is about
    rate x time (a Poisson count), and the version at each change time has just moved."""
    changes = changing.changes
    assert changes is not None
    horizon = EPOCH + 200 * DAY / CONFIG.time_scale
    ratios = []
    for page in pages_of(changing, Kind.FAST)[:15]:
        count, at = 0, EPOCH
        while (found := changes.next_change(page, at, horizon=horizon)) is not None:
            if count < 3:
                assert changes.version(page, found).number > changes.version(page, found - 1e-6).number
            count, at = count + 1, found
        expected = changes.rate(page) * (horizon - EPOCH)
        ratios.append(count / expected)
        assert abs(count - expected) < 5 * math.sqrt(expected) + 1
    assert abs(float(np.mean(ratios)) - 1) < 0.1


def test_spam_changes_at_every_request(changing: SimWeb) -> None:
    page = pages_of(changing, Kind.SPAM)[0]
    url = changing.url_of(page)
    bodies = {changing.body(url, EPOCH + 100 + k * 0.01) for k in range(10)}
    assert len(bodies) == 10


def test_last_modified_etag_and_not_modified_over_http(changing: SimWeb, tmp_path: Path) -> None:
    """Each answer is what the page was at the request's logged arrival: 304 when the copy the
    conditions name is current (If-None-Match decides alone when sent), 200 with the page otherwise."""
    url = changing.url_of(pages_of(changing, Kind.SLOW)[0])
    host = url.split("/")[2]
    spam = next(
        (changing.url_of(p) for p in pages_of(changing, Kind.SPAM) if changing.url_of(p).split("/")[2] == host), None
    )
    log = tmp_path / "requests.tsv"
    conditions = [
        "",
        "If-None-Match: {etag}\r\n",
        'If-None-Match: "other", W/{etag}\r\n',
        'If-None-Match: "other"\r\n',
        'If-None-Match: "other"\r\nIf-Modified-Since: {last_modified}\r\n',  # the tag decides alone
        "If-Modified-Since: {last_modified}\r\n",
        "If-Modified-Since: not a date\r\n",
        f"If-Modified-Since: {formatdate(EPOCH - DAY, usegmt=True)}\r\n",
    ]

    async def exchange(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str, extra: str
    ) -> tuple[int, dict[str, str], bytes]:
        writer.write(request(host, path, extra=extra))
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {n.lower(): v.strip() for n, _, v in (line.partition(":") for line in lines[1:] if line)}
        status = int(lines[0].split(" ")[1])
        body = b"" if status == 304 else await reader.readexactly(int(headers["content-length"]))
        return status, headers, body

    async def scenario() -> list[tuple[int, dict[str, str], bytes]]:
        server = SimServer(changing, log_path=log)
        await server.start()
        replies = []
        try:
            reader, writer = await asyncio.open_connection(server.host_address[changing.host_index(host)], PORT)
            first = await exchange(reader, writer, path_of(url), "")
            replies.append(first)
            for condition in conditions[1:]:
                extra = condition.format(etag=first[1]["etag"], last_modified=first[1]["last-modified"])
                replies.append(await exchange(reader, writer, path_of(url), extra))
            if spam is not None:
                replies.append(await exchange(reader, writer, path_of(spam), ""))
            writer.close()
        finally:
            await server.stop()
        return replies

    replies = run(scenario)
    entries = read_log(log)
    served = [changing.version_at(url, entry.arrived) for entry in entries[: len(conditions)]]
    first_version = served[0]
    assert first_version is not None
    status, headers, body = replies[0]
    assert status == 200 and body == changing.body(url, entries[0].arrived)  # the judge's version
    assert headers["last-modified"] == formatdate(int(first_version.changed_at), usegmt=True)
    expected = []
    for condition, version in zip(conditions, served, strict=True):
        assert version is not None
        same = version == first_version
        if condition.startswith("If-None-Match: {etag}") or condition.startswith('If-None-Match: "other", W/'):
            expected.append(304 if same else 200)
        elif condition.startswith("If-Modified-Since: {"):
            expected.append(304 if int(version.changed_at) <= int(first_version.changed_at) else 200)
        else:
            expected.append(200)
    assert [reply[0] for reply in replies[: len(conditions)]] == expected
    assert expected.count(304) >= 3  # a page that changes every day or more: the copy was current
    for status, headers, body in replies[: len(conditions)]:
        assert headers["etag"] == replies[0][1]["etag"] or status == 200
        if status == 304:
            assert body == b"" and "content-length" not in headers
    assert [entry.status for entry in entries[: len(conditions)]] == expected
    if spam is not None:  # a dynamic page: an ETag but no Last-Modified
        assert "etag" in replies[-1][1] and "last-modified" not in replies[-1][1]


def test_news_urls_exist_from_their_version_on(changing: SimWeb) -> None:
    changes = changing.changes
    assert changes is not None
    page = pages_of(changing, Kind.FAST)[1]
    url = changing.url_of(page)
    at = EPOCH
    while True:  # the first version with a news link
        found = changes.next_change(page, at, horizon=EPOCH + 100 * DAY)
        assert found is not None
        version = changes.version(page, found + 1e-6)
        if changes.news_version(version.number, page):
            break
        at = found + 1e-6
    news = changing.news_url(page, version.number)
    assert news.encode() in changing.body(url, found + 1e-6)
    host = changing.host_index(url.split("/")[2])
    path = "/" + news.split("/", 3)[3]
    assert changing.response(host, path, found - 1e-3).status == 404  # not yet
    item = changing.response(host, path, found + 1e-3)
    assert item.status == 200 and url.encode() in item.body
    assert changing.response(host, "/news/1-x.html", found).status == 404


def synthetic_log(web: SimWeb, pages: list[int], interval: float, start: float, end: float) -> list[LogEntry]:
    """A crawler that refetches every page at the same interval, each at its own phase."""
    entries = []
    for k, page in enumerate(pages):
        url = web.url_of(page)
        host, path = url.split("/")[2], "/" + url.split("/", 3)[3]
        at = start - interval + (k * 0.6180339887 % 1.0) * interval
        while at < end:
            entries.append(LogEntry(at, at + 0.01, 1, "127.0.0.1", host, path, 200, 1000, "GET"))
            at += interval
    return entries


def test_freshness_of_a_uniform_schedule_matches_cho_and_garcia_molinas_formula(changing: SimWeb) -> None:
    changes = changing.changes
    assert changes is not None
    pages = [
        p for p in range(changing.data.pages) if changes.kind_and_rate(p)[0] in (Kind.SLOW, Kind.FAST, Kind.STATIC)
    ]
    interval = 600.0  # real seconds (10 hours simulated)
    start, end = EPOCH + 3600.0, EPOCH + 3600.0 + 16 * 3600.0
    judged = crawl_freshness(changing, synthetic_log(changing, pages, interval, start, end), start=start, end=end)
    rates = np.array([changes.rate(p) for p in pages])
    expected = float(freshness(rates, np.full(len(pages), 1 / interval)).mean())
    assert judged.pages == len(pages)
    assert judged.freshness == pytest.approx(expected, abs=0.02)
    assert judged.age > 0
    faster = crawl_freshness(changing, synthetic_log(changing, pages, interval / 4, start, end), start=start, end=end)
    assert faster.freshness > judged.freshness and faster.age < judged.age
    with pytest.raises(ValueError, match="changing web"):
        crawl_freshness(SimWeb.generate(CONFIG.replace(changing=False)), [], start=start, end=end)


def test_the_time_scale_speeds_every_change_up_and_the_cli_starts_the_clock_now() -> None:
    import time

    from crawlspace.simweb.cli import build_config

    slow, fast = SimWeb.generate(CONFIG.replace(time_scale=1.0)), SimWeb.generate(CONFIG)
    assert slow.changes is not None and fast.changes is not None
    page = pages_of(fast, Kind.FAST)[0]
    assert fast.changes.rate(page) == pytest.approx(60 * slow.changes.rate(page))
    one_minute = fast.version_at(fast.url_of(page), EPOCH + 60.0)
    one_hour = slow.version_at(slow.url_of(page), EPOCH + 3600.0)
    assert one_minute is not None and one_hour is not None and one_minute.number == one_hour.number
    assert one_minute.changed_at - EPOCH == pytest.approx((one_hour.changed_at - EPOCH) / 60, abs=1e-5)
    started = build_config(None, {"changing": True, "time_scale": 60.0}, pick_port=False)
    assert started.changing and abs(started.change_epoch - time.time()) < 5 and started.time_scale == 60.0
    kept = build_config(None, {"changing": True, "change_epoch": EPOCH}, pick_port=False)
    assert kept.change_epoch == EPOCH


def test_a_lagging_mirror_serves_its_original_as_it_was_the_lag_before() -> None:
    lag = 3600.0
    web = SimWeb.generate(CONFIG.replace(duplicate_fraction=0.5, mirror_lag=lag))
    assert web.changes is not None
    clusters = [urls for urls in web.duplicate_clusters().values() if any("/mirror/" in url for url in urls[1:])]
    pairs = [(urls[0], url) for urls in clusters for url in urls[1:] if "/mirror/" in url]
    changing_pairs = [
        (original, mirror)
        for original, mirror in pairs
        if web.changes.kind_and_rate(web.page_of(web.node_of(original) or 0) or 0)[0] == Kind.FAST
    ]
    assert changing_pairs
    behind = lag / CONFIG.time_scale  # real seconds
    lagging = 0
    for original, mirror in changing_pairs:
        for at in (EPOCH + 5000.0, EPOCH + 20000.0, EPOCH + 90000.0):
            assert web.body(mirror, at) == web.body(original, at - behind)
            assert web.version_at(mirror, at) == web.version_at(original, at - behind)
            lagging += web.body(mirror, at) != web.body(original, at)
    assert lagging > 0  # the original changed within the lag: the mirror shows its old content
    with pytest.raises(SimWebConfigError, match="mirror_lag"):
        CONFIG.replace(mirror_lag=-1.0)
