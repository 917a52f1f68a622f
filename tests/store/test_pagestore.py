"""The page store: one fetch becomes WARC records and crawl-table cells, refetches keep history exact."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawlspace.fetch import FetchResult, Outcome
from crawlspace.parse import Link, ParsedPage
from crawlspace.parse.html import parse_html
from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.store.pagestore import PageStore, StoreOptions, page_outlinks
from crawlspace.store.warc import Capture, read_record
from crawlspace.urls import InvalidURL, normalize
from tests.store.builders import fetch_result, html_page, parsed

A = "http://a.test/"
B = "http://b.test/page"
C = "http://c.test/"


def store_at(path: Path, **options: object) -> PageStore:
    return PageStore(path, StoreOptions(**options), warcinfo={"isPartOf": "test"})  # type: ignore[arg-type]


def record_page(
    store: PageStore, url: str, title: str, links: list[tuple[str, str]], *, started: float, fingerprint: int = 1
) -> Capture | None:
    body = html_page(title, f"text of {title}", links)
    return store.record(
        fetch_result(url, body, started=started, extra_headers=[("ETag", f'"{fingerprint}"')]),
        page=parsed(title, f"text of {title}", links),
        fingerprint=fingerprint,
        depth=1,
    )


def warc_records(directory: Path) -> list[tuple[str, str, dict[str, str]]]:
    found = []
    for path in sorted((directory / "warc").glob("*.warc.gz")):
        with open(path, "rb") as handle:
            for record in ArchiveIterator(handle, check_digests=True):
                headers = dict(record.rec_headers.headers)
                found.append((record.rec_type, headers.get("WARC-Target-URI", ""), headers))
    return found


def test_a_page_becomes_warc_records_and_a_row(tmp_path: Path) -> None:
    with store_at(tmp_path, store_text=True) as store:
        capture = record_page(
            store, A, "Page A", [("http://b.test/page", " to  B "), ("http://a.test/self", "self")], started=1e9
        )
    assert capture is not None
    types = [(kind, url) for kind, url, _ in warc_records(tmp_path)]
    assert types == [("warcinfo", ""), ("response", A), ("request", A), ("metadata", A)]
    from crawlspace.store import CrawlTable

    with CrawlTable(tmp_path / "table", readonly=True) as table:
        row = table.get(A)
        assert row is not None
        assert row.title == "Page A" and row.text == "text of Page A"
        assert row.outlinks == [("http://b.test/page", "to B", False), ("http://a.test/self", "self", False)]
        fetch = row.fetch
        assert fetch is not None
        assert fetch.status == 200 and fetch.fingerprint == 1 and fetch.etag == '"1"'
        assert fetch.fetched == 1e9 and fetch.fetches == 1 and fetch.changed is None and fetch.depth == 1
        assert "changed" not in row.latest("fetch")  # defaults are not written
        assert Capture.from_list(row.latest("content", "warc")) == capture
        anchors = table.get(B)
        assert anchors is not None and [(a.source, a.text) for a in anchors.anchors] == [(A, "to B")]
    response = read_record(tmp_path / "warc" / capture.filename, capture.offset, capture.length)
    assert response.type == "response" and response.headers["warc-target-uri"] == A


def test_anchor_texts_from_several_pages_collect_on_the_target(tmp_path: Path) -> None:
    with store_at(tmp_path, flush_pages=2) as store:
        for number in range(7):
            record_page(store, f"http://s{number}.test/", f"S{number}", [(C, f"anchor {number}")], started=1e9)
    from crawlspace.store import CrawlTable

    with CrawlTable(tmp_path / "table", readonly=True) as table:
        row = table.get(C)
    assert row is not None and row.fetch is None
    assert sorted((a.source, a.text) for a in row.anchors) == [
        (f"http://s{number}.test/", f"anchor {number}") for number in range(7)
    ]


def test_writes_are_batched(tmp_path: Path) -> None:
    clock = [0.0]
    store = PageStore(tmp_path, StoreOptions(flush_pages=10, flush_seconds=5.0), clock=lambda: clock[0])
    for number in range(25):
        record_page(store, f"http://s{number}.test/", "t", [(C, "x")], started=1e9)
    assert store.stats.commits == 2 and store.table.pending > 0
    clock[0] = 6.0
    assert store.maybe_flush() and store.stats.commits == 3 and store.table.pending == 0
    assert not store.maybe_flush()
    store.close()


@pytest.mark.parametrize("store_text", [False, True])
def test_refetch_keeps_change_history_and_version_limits(tmp_path: Path, store_text: bool) -> None:
    versions = {"title": 2, "content": 2, "fetch": 3, "anchor": 1}
    with store_at(tmp_path, max_versions=versions, flush_pages=1, store_text=store_text) as store:
        record_page(store, A, "v0", [(B, "b0"), (C, "c0")], started=1000.0, fingerprint=10)
        record_page(store, A, "v1", [(B, "b1")], started=2000.0, fingerprint=10)
        record_page(store, A, "v2", [(B, "b2"), (C, "c2")], started=3000.0, fingerprint=11)
        record_page(store, A, "v3", [(B, "b3")], started=4000.0, fingerprint=12)
        table = store.table
        store.flush()
        row = table.get(A, versions=10)
        assert row is not None
        assert [cell.value for cell in row.versions("title")] == ["v3", "v2"]
        fetches = [cell.value for cell in row.versions("fetch")]
        assert [f["fetched"] for f in fetches] == [4000.0, 3000.0, 2000.0]
        assert [f.get("changed") for f in fetches] == [True, True, False]
        assert fetches[0]["fetches"] == 4 and fetches[0]["changes"] == 2 and fetches[0]["first_fetched"] == 1000.0
        stored = [key for key, _ in table._range(b"test.a/http/\x00", b"test.a/http/\x01")]
        content_cells = 3 if store_text else 2  # warc, outlinks (and text)
        assert len(stored) == 2 + 3 + 2 * content_cells  # nothing beyond the limits
        b_row = table.get(B, versions=10)
        assert b_row is not None and [cell.value for cell in b_row.cells] == ["b3"]
        assert table.get(C) is None  # the link to C is gone: its anchor went with it


def test_an_exact_duplicate_is_a_revisit_of_the_original(tmp_path: Path) -> None:
    body = html_page("Same", "same text", [])
    with store_at(tmp_path) as store:
        original = store.record(fetch_result(A, body, started=1e9), page=parsed("Same", "same text", []), fingerprint=5)
        assert original is not None
        revisit = store.record_duplicate(fetch_result(B, body, started=1e9 + 1), A, 1e9, fingerprint=5)
        store.flush()
        row = store.table.get(B)
        assert row is not None and row.fetch is not None and row.fetch.duplicate_of == A
        assert Capture.from_list(row.latest("content", "warc")) == revisit
    assert store.stats.revisits == 1
    found = {(kind, url): headers for kind, url, headers in warc_records(tmp_path)}
    headers = found[("revisit", B)]
    assert headers["WARC-Refers-To"] == original.record_id
    assert headers["WARC-Refers-To-Target-URI"] == A
    assert headers["WARC-Refers-To-Date"] == original.date
    assert ("metadata", B) in found and ("request", B) in found


def test_a_duplicate_found_in_an_earlier_session_is_a_revisit_too(tmp_path: Path) -> None:
    body = b"<html>same</html>"
    with store_at(tmp_path) as store:
        store.record(fetch_result(A, body, started=1e9), page=parsed("", "same", []), fingerprint=5)
    with store_at(tmp_path) as store:
        store.record_duplicate(fetch_result(B, body), A, 1e9, fingerprint=5)
    assert ("revisit", B) in {(kind, url) for kind, url, _ in warc_records(tmp_path)}


def test_a_duplicate_of_a_page_this_store_does_not_hold_is_a_revisit_by_uri_and_date(tmp_path: Path) -> None:
    """The original was fetched by another partition of the crawl (its row is in another store): the
    revisit refers to it by target URI and date, and the row says duplicate-of all the same."""
    with store_at(tmp_path) as store:
        store.record_duplicate(fetch_result(B, b"<html>x</html>", started=1e9 + 3), A, 1e9, fingerprint=5, depth=2)
        store.flush()
        row = store.table.get(B)
    assert row is not None and row.fetch is not None and row.fetch.duplicate_of == A
    ((kind, _, headers),) = [record for record in warc_records(tmp_path) if record[0] in ("revisit", "response")]
    assert kind == "revisit" and store.stats.revisits == 1
    assert headers["WARC-Refers-To-Target-URI"] == A and headers["WARC-Refers-To-Date"] == "2001-09-09T01:46:40.000000Z"
    assert "WARC-Refers-To" not in headers


def test_a_duplicate_with_another_payload_is_stored_in_full(tmp_path: Path) -> None:
    """Equal fingerprints, different bytes (a collision): identical-payload-digest does not apply where the
    original's digest is known; neither can the page's own last body be referred to without its capture."""
    with store_at(tmp_path) as store:
        store.record(fetch_result(A, b"<html>x</html>", started=1e9), page=parsed("", "x", []), fingerprint=5)
        store.record_duplicate(fetch_result(B, b"<html>x</html> "), A, 1e9, fingerprint=5)
        store.record_duplicate(fetch_result(C, b"<html>y</html>"), C, 1e9, fingerprint=6)
    kinds = {(kind, url) for kind, url, _ in warc_records(tmp_path)}
    assert ("response", B) in kinds and ("response", C) in kinds and store.stats.revisits == 0


def test_a_duplicate_of_an_earlier_fetch_of_a_refetched_page_refers_to_that_fetch(tmp_path: Path) -> None:
    """The original page's last capture here is a later fetch of it (with another body): the revisit
    refers to the fetch the content set named, by URI and date, not to the capture at hand."""
    body = b"<html>old</html>"
    with store_at(tmp_path) as store:
        store.record(fetch_result(A, body, started=1e9), page=parsed("", "old", []), fingerprint=5)
        store.record(fetch_result(A, b"<html>new</html>", started=2e9), page=parsed("", "new", []), fingerprint=6)
        store.record_duplicate(fetch_result(B, body, started=3e9), A, 1e9, fingerprint=5)
    headers = next(headers for kind, url, headers in warc_records(tmp_path) if kind == "revisit")
    assert headers["WARC-Refers-To-Date"] == "2001-09-09T01:46:40.000000Z" and "WARC-Refers-To" not in headers


def test_a_failed_fetch_gets_a_fetch_cell_only(tmp_path: Path) -> None:
    failure = FetchResult(url=A, outcome=Outcome.TIMEOUT, started=1e9, duration=30.0, error="read timeout")
    with store_at(tmp_path) as store:
        assert store.record(failure, depth=2) is None
        store.flush()
        row = store.table.get(A)
    assert row is not None and [cell.family for cell in row.cells] == ["fetch"]
    assert row.latest("fetch") == {  # the cell as stored: crawls written before read the same
        "status": 0,
        "outcome": "timeout",
        "fetched": 1e9,
        "fetches": 1,
        "changes": 0,
        "first_fetched": 1e9,
        "duration": 30.0,
        "error": "read timeout",
        "depth": 2,
    }
    assert [kind for kind, _, _ in warc_records(tmp_path)] == []
    assert store.stats.failures == 1


def test_a_redirect_keeps_its_location(tmp_path: Path) -> None:
    result = fetch_result(A, b"", status=301, extra_headers=[("Location", "http://a.test/new")])
    with store_at(tmp_path) as store:
        store.record(result)
        store.flush()
        row = store.table.get(A)
    assert row is not None and row.fetch is not None
    assert row.fetch.status == 301 and row.fetch.location == "http://a.test/new"


def test_text_is_left_to_the_warc_by_default(tmp_path: Path) -> None:
    with store_at(tmp_path) as store:
        record_page(store, A, "T", [], started=1e9)
        store.flush()
        row = store.table.get(A)
    assert row is not None and row.title == "T" and row.text is None and row.latest("content", "warc")


def test_reopening_recovers_a_torn_warc_file(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    record_page(store, A, "T", [], started=1e9)
    store.flush()
    current = store.warc.current_file
    assert current is not None
    store.table.close()
    torn = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03partial"  # what a kill -9 in the middle of a write leaves
    with open(current, "ab") as handle:
        handle.write(torn)
    os.close(store.warc._file.fd)  # type: ignore[union-attr]
    dead = current.with_name(current.name.replace(f"-{os.getpid()}~", "-4999999~"))
    current.rename(dead)
    reopened = store_at(tmp_path)
    (recovered,) = reopened.stats.recovered
    assert recovered.path == dead and recovered.bytes_cut == len(torn) and recovered.records == 4
    reopened.close()


@pytest.mark.parametrize(
    ("links", "expected"),
    [
        ([("http://x.test/a#frag", "one"), ("http://x.test/a", "two")], [("http://x.test/a", "one", False)]),
        ([("http://x.test/a", ""), ("http://x.test/a", "named")], [("http://x.test/a", "named", False)]),
        ([("mailto:me@x.test", "mail"), ("http://a.test/", "self")], []),
    ],
)
def test_outlinks_are_normalized_and_distinct(
    links: list[tuple[str, str]], expected: list[tuple[str, str, bool]]
) -> None:
    assert page_outlinks(parsed("", "", links), A) == expected


def test_a_target_is_nofollow_only_when_every_link_to_it_is() -> None:
    links = [
        Link("http://x.test/n", "", True),
        Link("http://x.test/n", "named", True),
        Link("http://x.test/f", "first", True),
        Link("http://x.test/f", "again", False),
    ]
    assert page_outlinks(ParsedPage(links=links), A) == [
        ("http://x.test/n", "named", True),
        ("http://x.test/f", "first", False),
    ]


def test_outlink_targets_are_what_normalize_gives_on_every_link_of_the_simulated_web() -> None:
    web = SimWeb.generate(
        SimWebConfig(hosts=40, seed=3, mean_pages_per_host=20, mean_out_links=40.0, page_style="realistic")
    )
    checked = 0
    for node in range(0, web.data.pages, 3):
        url = web.url_of(node)
        page = parse_html(web.renderer.node_response(node).body, url, "text/html")
        expected: dict[str, None] = {}
        for link in page.links:
            try:
                target = normalize(link.url)
            except InvalidURL:
                continue
            if target != url:
                expected[target] = None
        assert [target for target, _, _ in page_outlinks(page, url)] == list(expected)
        checked += len(page.links)
    assert checked > 5000
