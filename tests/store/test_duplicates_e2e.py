"""Exact duplicates end to end: every body the crawl counts as an exact duplicate is stored as a revisit
record of a response it names by target URI and date, and its crawl-table row says duplicate-of,
whichever process fetched the original (issue 14, defect 2). Judged from what the crawl leaves: the
WARC files (read with fastwarc; warcio checks them too), stats.json and the crawl table.

Pages only: robots.txt is not a page (no content test; identical robots.txt files on several hosts
are stored as they were fetched) and neither are error responses.
"""

from __future__ import annotations

import gzip
import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastwarc.warc import ArchiveIterator, WarcRecordType

from crawlspace.api import Crawler
from crawlspace.config import CrawlConfig
from crawlspace.fetch import FetchResult, Outcome
from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.simweb.server import serve_in_background
from crawlspace.store.reader import CrawlReader
from tests.store.test_store_e2e import assert_valid_warcs

WEB = SimWebConfig(
    hosts=24,
    seed=7,
    mean_pages_per_host=16,
    duplicate_fraction=0.15,
    near_duplicate_fraction=0.05,
    robots_crawl_delay=0.0,
    include_trap=False,
)


@dataclass
class Stored:
    """The page records of a crawl's WARC files, as a reader sees them."""

    responses: dict[str, list[tuple[str, str, str]]] = field(default_factory=lambda: defaultdict(list))
    """payload digest -> (target URI, WARC-Date, record id) of each 2xx response record of a page"""
    revisits: list[dict[str, str]] = field(default_factory=list)
    """the headers of each revisit record"""

    @property
    def repeated(self) -> dict[str, list[str]]:
        """Digests stored in full more than once, with their URIs."""
        return {digest: [uri for uri, _, _ in found] for digest, found in self.responses.items() if len(found) > 1}

    def exact_revisits(self) -> list[dict[str, str]]:
        """Revisits of another URL's response (a page refetched unchanged refers to itself)."""
        return [r for r in self.revisits if r["WARC-Refers-To-Target-URI"] != r["WARC-Target-URI"]]


def read_stored(crawl: Path) -> Stored:
    stored = Stored()
    kinds = WarcRecordType.response | WarcRecordType.revisit
    for path in sorted((crawl / "warc").glob("*.warc.gz")):
        with open(path, "rb") as handle:
            for record in ArchiveIterator(handle, record_types=kinds, parse_http=True):
                headers = dict(record.headers)
                if record.record_type == WarcRecordType.revisit:
                    stored.revisits.append(headers)
                    continue
                uri = headers["WARC-Target-URI"]
                status = (record.http_headers.status_code or 0) if record.http_headers is not None else 0
                if 200 <= status < 300 and not uri.endswith("/robots.txt"):
                    digest = headers["WARC-Payload-Digest"]
                    stored.responses[digest].append((uri, headers["WARC-Date"], headers["WARC-Record-ID"]))
    return stored


def assert_exact_duplicates_are_revisits(crawl: Path) -> Stored:
    """The four properties of issue 14 defect 2, from the crawl's output alone."""
    stored = read_stored(crawl)
    repeated = stored.repeated
    assert not repeated, (
        f"{sum(len(uris) - 1 for uris in repeated.values())} full responses repeat a payload already stored:"
        f" {sorted(repeated.items())[:3]}"
    )
    by_digest = {digest: found[0] for digest, found in stored.responses.items()}
    exact = stored.exact_revisits()
    for revisit in exact:
        digest = revisit["WARC-Payload-Digest"]
        assert digest in by_digest, f"{revisit['WARC-Target-URI']}: no response with its payload"
        uri, date, record_id = by_digest[digest]
        assert (revisit["WARC-Refers-To-Target-URI"], revisit["WARC-Refers-To-Date"]) == (uri, date), revisit
        assert revisit.get("WARC-Refers-To", record_id) == record_id, revisit
    stats = json.loads((crawl / "stats.json").read_text())
    assert len(exact) == stats["duplicate_content"], (len(exact), stats["duplicate_content"])
    duplicate_of = {r["WARC-Target-URI"]: r["WARC-Refers-To-Target-URI"] for r in exact}
    in_table: dict[str, str] = {}
    with CrawlReader(crawl) as reader:
        for page in reader.pages():
            of = page.fetch.duplicate_of
            if of and of != page.url:
                in_table[page.url] = of
    assert in_table == duplicate_of
    return stored


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb.generate(WEB)


@pytest.mark.parametrize(("processes", "store_near"), [(1, True), (2, True), (2, False)])
def test_every_exact_duplicate_is_a_revisit_of_a_stored_response(
    web: SimWeb, tmp_path: Path, processes: int, store_near: bool
) -> None:
    """Copies sit on their original's host or on another one, so with two processes many originals
    were fetched by the other process; with near-duplicates not stored, the first URL of each body
    waits to be settled before its copies are told about it."""
    crawl = tmp_path / "crawl"
    with serve_in_background(web, tmp_path / "server", seeds=4) as server:
        config = CrawlConfig(
            min_delay=0.0, delay_factor=0.0, concurrency=16, allow_private_addresses=True,
            hosts_file=str(server.hosts_file), processes=processes, max_seconds=120.0,
            store_near_duplicates=store_near,
        )  # fmt: skip
        started = time.monotonic()
        stats = Crawler(config, out=crawl, seeds=server.seeds, progress=False).run()
        elapsed = time.monotonic() - started
    assert stats.termination == "frontier-empty"
    assert elapsed < 60  # no claim waited out its timeout
    assert_valid_warcs(crawl)  # warcio and fastwarc, revisits without WARC-Refers-To included
    stored = assert_exact_duplicates_are_revisits(crawl)
    fetched = {uri for found in stored.responses.values() for uri, _, _ in found}
    fetched |= {r["WARC-Target-URI"] for r in stored.revisits}
    clusters: dict[int, int] = defaultdict(int)
    for url in fetched:
        cluster = web.duplicate_cluster(url)
        if cluster is not None:
            clusters[cluster] += 1
    assert stats.duplicate_content == sum(count - 1 for count in clusters.values()) > 20  # every copy recognized


# -- what simweb does not serve: other types, another Content-Encoding, copies of near-duplicates -----------

WORDS = [f"word{index}" for index in range(2000)]
TEXT = " ".join(WORDS[(index * 7919) % len(WORDS)] for index in range(600))


def html(title: str, text: str, links: tuple[str, ...] = ()) -> bytes:
    anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
    return f"<html><head><title>{title}</title></head><body><p>{text}</p>{anchors}</body></html>".encode()


ROOT = "scripted://site/"
NEAR_TEXT = "changed" + TEXT[TEXT.index(" ") :]  # its first word of 600 changed
SITE: dict[str, tuple[str, bytes, bytes]] = {  # path -> (content type, body as sent, Content-Encoding)
    "n.html": ("text/html", html("N", TEXT), b""),
    "o.html": ("text/html", html("N", NEAR_TEXT), b""),  # a near-duplicate of n.html
    "c.html": ("text/html", html("N", NEAR_TEXT), b""),  # an exact copy of o.html
    "t1.txt": ("text/plain", b"the same plain text\n" * 50, b""),
    "t2.txt": ("text/plain", b"the same plain text\n" * 50, b""),  # not parsed, still a copy
    "x.html": ("text/html", html("X", TEXT[::-1]), b""),
    "x2.html": ("text/html", html("X", TEXT[::-1]), b""),
    "g.html": ("text/html", gzip.compress(html("X", TEXT[::-1]), mtime=0), b"gzip"),  # x.html's bytes, gzipped
}
SITE["index.html"] = ("text/html", html("Index", "links", tuple(ROOT + path for path in SITE)), b"")


class ScriptedSite:
    """A protocol handler answering from SITE: a web without a server, in link order."""

    polite = False

    async def fetch(self, url: str) -> FetchResult:
        path = url.removeprefix(ROOT) or "index.html"
        if path not in SITE:
            return FetchResult(
                url=url, outcome=Outcome.CLIENT_ERROR, status=404, reason="Not Found", started=time.time()
            )
        content_type, body, encoding = SITE[path]
        headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
        if encoding:
            headers.append(("Content-Encoding", encoding.decode()))
        return FetchResult(
            url=url, outcome=Outcome.OK, status=200, reason="OK", headers=headers, body=body,
            decoded=gzip.decompress(body) if encoding else body, started=time.time(), duration=0.001,
        )  # fmt: skip


@pytest.mark.parametrize("store_near", [True, False])
def test_copies_of_any_type_are_revisits_and_copies_of_unstored_near_duplicates_are_not_stored(
    tmp_path: Path, store_near: bool
) -> None:
    """A plain-text copy is a revisit like an HTML one; the same page under another Content-Encoding is
    another payload (a near-duplicate of similarity 1, stored in full or not at all); and a copy of a
    near-duplicate that was not stored is not a revisit of nothing but a near-duplicate itself."""
    crawl = tmp_path / "crawl"
    config = CrawlConfig(scope="prefix", concurrency=1, store_near_duplicates=store_near)
    handlers = {"scripted": ScriptedSite()}
    stats = Crawler(config, out=crawl, seeds=[ROOT + "index.html"], handlers=handlers, progress=False).run()
    assert stats.pages_fetched == len(SITE) and stats.termination == "frontier-empty"
    stored = assert_exact_duplicates_are_revisits(crawl)
    revisits = {r["WARC-Target-URI"].removeprefix(ROOT): r["WARC-Refers-To-Target-URI"] for r in stored.revisits}
    full = {uri.removeprefix(ROOT) for found in stored.responses.values() for uri, _, _ in found}
    if store_near:
        assert revisits == {"c.html": ROOT + "o.html", "t2.txt": ROOT + "t1.txt", "x2.html": ROOT + "x.html"}
        assert full == {"index.html", "n.html", "o.html", "t1.txt", "x.html", "g.html"}
        assert stats.near_duplicate_content == 2  # o.html, g.html
    else:
        assert revisits == {"t2.txt": ROOT + "t1.txt", "x2.html": ROOT + "x.html"}
        assert full == {"index.html", "n.html", "t1.txt", "x.html"}
        assert stats.near_duplicate_content == 3  # o.html, c.html, g.html
