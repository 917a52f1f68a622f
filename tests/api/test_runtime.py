"""How the engine runs extensions (crawlspace.hooks.runtime), without a network: every form of processor,
isolation and counting of failures, distinct-error reports, timeouts, bounded concurrency, pools."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import pytest

from crawlspace.fetch import FetchResult, Outcome
from crawlspace.hooks import FileHandler, Follow, FrontierEntry, Item, ItemsLost, Page, run_in_process, run_in_thread
from crawlspace.hooks.runtime import MAX_REPORTS, Extensions


def page(url: str = "http://a.test/", depth: int = 1, status: int = 200, text: str = "some words") -> Page:
    return Page(url=url, status=status, headers=(("Content-Type", "text/html"),), body=b"<p>", depth=depth,
                fetched_at=0.0, text=text)  # fmt: skip


class Collect:
    def __init__(self) -> None:
        self.items: list[Item] = []

    def write(self, item: Item) -> None:
        self.items.append(item)

    def close(self) -> None:
        return None


def run(extensions: Extensions, *pages: Page) -> list[tuple[str, list[str]]]:
    """Submit pages, wait for them; the (page URL, Follow hrefs) the engine would have received."""
    followed: list[tuple[str, list[str]]] = []

    async def go() -> None:
        for each in pages:
            extensions.submit(each, lambda p, urls: followed.append((p.url, urls)))
        await extensions.drain()
        await extensions.close()

    asyncio.run(go())
    return followed


def plain(page: Page) -> Item:
    return {"url": page.url}


def listing(page: Page) -> list[Item | Follow]:
    return [{"n": 1}, Follow("next.html"), {"n": 2}]


def generator(page: Page) -> Iterator[Item | Follow]:
    yield {"gen": page.url}
    yield Follow("/other")


async def coroutine(page: Page) -> list[Item]:
    await asyncio.sleep(0)
    return [{"async": page.url}]


async def async_generator(page: Page) -> AsyncIterator[Item | Follow]:
    await asyncio.sleep(0)
    yield {"agen": page.url}
    yield Follow("http://b.test/")


@dataclasses.dataclass
class Record:
    url: str
    size: int


class StructRecord(msgspec.Struct):
    url: str


def typed_items(page: Page) -> list[Any]:
    return [Record(page.url, 3), StructRecord(page.url)]


def test_every_form_of_processor() -> None:
    sink = Collect()
    extensions = Extensions(
        processors=[plain, listing, generator, coroutine, async_generator, typed_items], sinks=[sink]
    )
    followed = run(extensions, page("http://a.test/x"))
    assert sink.items == [
        {"url": "http://a.test/x"},
        {"n": 1},
        {"n": 2},
        {"gen": "http://a.test/x"},
        {"async": "http://a.test/x"},
        {"agen": "http://a.test/x"},
        {"url": "http://a.test/x", "size": 3},
        {"url": "http://a.test/x"},
    ]
    assert followed == [
        ("http://a.test/x", ["next.html"]),
        ("http://a.test/x", ["/other"]),
        ("http://a.test/x", ["http://b.test/"]),
    ]
    stats = extensions.stats()
    assert stats["processors"]["listing"]["items"] == 2 and stats["processors"]["listing"]["follows"] == 1
    assert stats["errors"] == []


def test_names_are_unique_and_lambdas_named() -> None:
    extensions = Extensions(processors=[plain, plain, lambda page: None], filters=[lambda entry: True])
    assert list(extensions.stats()["processors"]) == ["plain", "plain#2", "lambda"]
    assert list(extensions.stats()["filters"]) == ["lambda"]


def not_an_item(page: Page) -> list[object]:
    return [{"ok": 1}, 42]


def test_outputs_that_are_not_items_are_errors(caplog: pytest.LogCaptureFixture) -> None:
    sink = Collect()
    extensions = Extensions(processors=[not_an_item], sinks=[sink])
    errors: Counter[str] = Counter()
    extensions.attach(errors)
    with caplog.at_level(logging.ERROR, logger="crawlspace.hooks"):
        run(extensions, page())
    assert sink.items == [{"ok": 1}]  # what came before the bad output is kept
    assert errors == {"processor-error": 1}
    assert "not int" in extensions.reports[0].error


def fails_in_two_places(page: Page) -> None:
    if page.depth == 1:
        raise ValueError("one")
    raise ValueError("two")


def test_distinct_errors_are_reported_once_each(caplog: pytest.LogCaptureFixture) -> None:
    extensions = Extensions(processors=[fails_in_two_places])
    with caplog.at_level(logging.ERROR, logger="crawlspace.hooks"):
        run(extensions, *(page(f"http://a.test/{i}", depth=1 + i % 2) for i in range(10)))
    reports = extensions.reports
    assert [(report.error, report.count) for report in reports] == [("ValueError: one", 5), ("ValueError: two", 5)]
    assert reports[0].url == "http://a.test/0" and reports[1].url == "http://a.test/1"  # the first occurrence
    assert 'raise ValueError("one")' in reports[0].traceback
    assert len([r for r in caplog.records if r.name == "crawlspace.hooks"]) == 2
    assert extensions.stats()["processors"]["fails_in_two_places"]["errors"] == 10


def raises_a_new_kind_each_time(page: Page) -> None:
    raise type(f"Error{page.depth}", (Exception,), {})("x")


def test_reports_are_bounded() -> None:
    extensions = Extensions(processors=[raises_a_new_kind_each_time])
    run(extensions, *(page(depth=number) for number in range(MAX_REPORTS + 5)))
    stats = extensions.stats()
    assert len(stats["errors"]) == MAX_REPORTS and stats["errors_not_reported"] == 5
    assert stats["processors"]["raises_a_new_kind_each_time"]["errors"] == MAX_REPORTS + 5


def test_filters_verdicts_and_failures() -> None:
    def by_path(entry: FrontierEntry) -> bool | str:
        if "/skip/" in entry.url:
            return False
        if "/why/" in entry.url:
            return "because"
        if "/boom/" in entry.url:
            raise RuntimeError("bug")
        if "/none/" in entry.url:
            return None  # type: ignore[return-value]  # the bug under test
        return True

    extensions = Extensions(filters=[by_path])
    errors: Counter[str] = Counter()
    extensions.attach(errors)
    verdicts = [
        extensions.rejection(FrontierEntry(f"http://a.test/{part}/x"))
        for part in ("ok", "skip", "why", "boom", "none", "boom")
    ]
    assert verdicts == [None, "by_path", "by_path:because", "by_path:error", "by_path:error", "by_path:error"]
    assert errors == {"filter-error": 3}
    assert [(report.error, report.count) for report in extensions.reports] == [
        ("RuntimeError: bug", 2),
        ("TypeError: a filter returns True, False or a reason string, not None", 1),
    ]
    counts = extensions.stats()["filters"]["by_path"]
    assert counts == {"calls": 6, "rejected": 5, "errors": 3}


def test_first_rejecting_filter_wins() -> None:
    calls: list[str] = []

    def first(entry: FrontierEntry) -> bool:
        calls.append("first")
        return False

    def second(entry: FrontierEntry) -> bool:
        calls.append("second")
        return True

    assert Extensions(filters=[first, second]).rejection(FrontierEntry("http://a.test/")) == "first"
    assert calls == ["first"]


class LosesBatches:
    items = 0

    def __init__(self) -> None:
        self.offered = 0

    def write(self, item: Item) -> None:
        self.offered += 1
        if self.offered % 3 == 0:
            raise ItemsLost("a batch of 3 could not be written", 3)

    def close(self) -> None:
        raise OSError("cannot sync")


def test_sink_failures_are_isolated_and_counted() -> None:
    good = Collect()
    extensions = Extensions(processors=[plain], sinks=[LosesBatches(), good])
    errors: Counter[str] = Counter()
    extensions.attach(errors)
    run(extensions, *(page(f"http://a.test/{i}") for i in range(9)))
    assert len(good.items) == 9  # the other sink got everything
    sinks = extensions.stats()["sinks"]
    assert sinks["LosesBatches"] == {"offered": 9, "items": 0, "lost": 9, "errors": 4}  # 3 batches + close
    assert errors == {"sink-error": 4}
    assert {report.error for report in extensions.reports} == {
        "ItemsLost: a batch of 3 could not be written",
        "OSError: cannot sync",
    }


async def slow(page: Page) -> None:
    await asyncio.sleep(10)


def test_slow_async_processor_times_out() -> None:
    extensions = Extensions(processors=[slow, plain], sinks=[sink := Collect()], timeout=0.05)
    errors: Counter[str] = Counter()
    extensions.attach(errors)
    run(extensions, page())
    assert errors == {"processor-timeout": 1}
    assert extensions.stats()["processors"]["slow"]["timeouts"] == 1
    assert sink.items == [{"url": "http://a.test/"}]  # the next processor still ran


def test_room_bounds_pages_in_processing() -> None:
    release = asyncio.Event()
    running: list[int] = []

    async def waits(page: Page) -> None:
        running.append(1)
        await release.wait()

    extensions = Extensions(processors=[waits], concurrency=3)

    async def go() -> None:
        for number in range(3):
            await extensions.room()
            extensions.submit(page(f"http://a.test/{number}"), lambda p, u: None)
        room = asyncio.ensure_future(extensions.room())
        await asyncio.sleep(0.05)
        assert not room.done() and extensions.busy and extensions.pending == 3  # a fourth page must wait
        release.set()
        await asyncio.wait_for(room, 1)
        await extensions.drain()
        assert not extensions.busy

    asyncio.run(go())
    assert len(running) == 3 and extensions.stats()["peak_pages_processing"] == 3


def pid_of_worker(page: Page) -> Item:
    return {"pid": os.getpid(), "words": len(page.text.split())}


def fails_in_worker(page: Page) -> None:
    raise ZeroDivisionError("in the worker")


def test_process_pool_runs_elsewhere_and_reports_the_workers_traceback() -> None:
    sink = Collect()
    extensions = Extensions(
        processors=[run_in_process(pid_of_worker, workers=1), run_in_process(fails_in_worker, workers=1)],
        sinks=[sink],
    )
    run(extensions, page(text="one two three"), page("http://a.test/2"))
    assert [item["words"] for item in sink.items] == [3, 2]
    assert {item["pid"] for item in sink.items} != {os.getpid()}
    [report] = extensions.reports
    assert report.count == 2 and report.error == "ZeroDivisionError: in the worker"
    assert 'raise ZeroDivisionError("in the worker")' in report.traceback  # the worker's own frames


def test_thread_pool() -> None:
    sink = Collect()
    extensions = Extensions(processors=[run_in_thread(generator, workers=2)], sinks=[sink])
    followed = run(extensions, page())
    assert sink.items == [{"gen": "http://a.test/"}] and followed == [("http://a.test/", ["/other"])]


class Handler:
    polite = False

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    async def fetch(self, url: str) -> FetchResult:
        if self.behaviour == "raise":
            raise RuntimeError("handler bug")
        if self.behaviour == "slow":
            await asyncio.sleep(10)
        if self.behaviour == "wrong":
            return "not a result"  # type: ignore[return-value]
        return FetchResult(url="x-other-spelling", outcome=Outcome.OK, status=200)


@pytest.mark.parametrize(
    ("behaviour", "outcome", "error"),
    [("ok", Outcome.OK, ""), ("raise", Outcome.NETWORK_ERROR, "RuntimeError"), ("wrong", Outcome.NETWORK_ERROR,
     "TypeError"), ("slow", Outcome.TIMEOUT, "took more than")],
)  # fmt: skip
def test_handler_failures_become_outcomes(behaviour: str, outcome: Outcome, error: str) -> None:
    handler = Handler(behaviour)
    extensions = Extensions(handlers={"x-test": handler}, fetch_timeout=0.05)
    assert extensions.schemes == {"x-test"} and extensions.other_schemes == {"x-test"}
    assert extensions.handler_for("X-TEST:thing") is handler and extensions.handler_for("http://a/") is None
    result = asyncio.run(extensions.fetch(handler, "x-test:thing"))
    assert result.outcome is outcome and result.url == "x-test:thing"
    assert error in result.error


def test_handler_registration_is_checked(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="not a URL scheme"):
        Extensions(handlers={"fi le": FileHandler(tmp_path)})
    with pytest.raises(TypeError, match="no fetch"):
        Extensions(handlers={"x": object()})  # type: ignore[dict-item]

    class Impolite:
        async def fetch(self, url: str) -> FetchResult:
            raise NotImplementedError

    with pytest.raises(TypeError, match="bool attribute `polite`"):
        Extensions(handlers={"x": Impolite()})  # type: ignore[dict-item]
    assert Extensions(handlers={"https": Handler("ok")}).other_schemes == frozenset()


def test_drain_within_a_grace_period_abandons_what_is_left() -> None:
    extensions = Extensions(processors=[slow])
    errors: Counter[str] = Counter()
    extensions.attach(errors)

    async def go() -> float:
        extensions.submit(page(), lambda p, u: None)
        extensions.submit(page("http://a.test/2"), lambda p, u: None)
        started = asyncio.get_running_loop().time()
        await extensions.drain(timeout=0.05)
        return asyncio.get_running_loop().time() - started

    assert asyncio.run(go()) < 5  # not the processor's 10 s
    assert errors == {"processing-abandoned": 2} and not extensions.busy
