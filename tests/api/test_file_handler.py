"""FileHandler, the worked example of a protocol handler: web-server semantics over a directory, and
never a byte from outside it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from crawlspace.fetch import FetchResult, Outcome
from crawlspace.hooks import FileHandler
from crawlspace.store.rowkey import row_key, url_of
from crawlspace.urls import InvalidURL, Normalizer


@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    (root / "docs").mkdir(parents=True)
    (root / "index.html").write_text("<a href='docs/'>docs</a>")
    (root / "docs" / "a b.txt").write_text("hello")
    (root / "docs" / "page.html").write_text("<title>Page</title>")
    (root / "archive.tar.gz").write_bytes(b"\x1f\x8b")
    (tmp_path / "secret.txt").write_text("do not read")
    return root


def fetch(handler: FileHandler, url: str) -> FetchResult:
    return asyncio.run(handler.fetch(url))


def test_files_directories_and_missing(site: Path) -> None:
    handler = FileHandler(site)
    root = handler.url_of(site)
    assert root.startswith("file:///") and root.endswith("/site/")

    index = fetch(handler, root)
    assert (index.status, index.outcome, index.content_type) == (200, Outcome.OK, "text/html")
    assert index.content() == b"<a href='docs/'>docs</a>"

    text = fetch(handler, root + "docs/a%20b.txt")
    assert (text.status, text.content_type, text.body) == (200, "text/plain", b"hello")
    assert text.header("content-length") == "5" and text.header("last-modified")

    redirect = fetch(handler, root + "docs")
    assert (redirect.status, redirect.header("location")) == (301, root + "docs/")

    listing = fetch(handler, root + "docs/")
    assert listing.status == 200 and b'href="a%20b.txt"' in listing.body and b'href="page.html"' in listing.body

    assert fetch(handler, root + "nope.html").status == 404
    assert fetch(handler, root + "archive.tar.gz").content_type == "application/gzip"
    assert fetch(handler, root).duration >= 0 and fetch(handler, root).started > 0


def test_nothing_outside_the_root_is_read(site: Path, tmp_path: Path) -> None:
    handler = FileHandler(site)
    root = handler.url_of(site)
    (site / "escape").symlink_to(tmp_path / "secret.txt")
    for url in (
        handler.url_of(tmp_path / "secret.txt"),
        root + "../secret.txt",
        root + "%2E%2E/secret.txt",
        root + "escape",
        "file:///etc/passwd",
        "file://otherhost/share/x",
    ):
        result = fetch(handler, url)
        assert result.status == 403 and b"do not read" not in result.body, url


def test_special_files_and_listing_switch(site: Path) -> None:
    os.mkfifo(site / "fifo")  # reading it would block forever
    handler = FileHandler(site, listings=False)
    root = handler.url_of(site)
    assert fetch(handler, root + "fifo").status == 403
    assert fetch(handler, root + "docs/").status == 403


def test_truncated_at_max_bytes(site: Path) -> None:
    (site / "big.bin").write_bytes(b"x" * 5000)
    result = fetch(FileHandler(site, max_bytes=1024), FileHandler(site).url_of(site / "big.bin"))
    assert (result.outcome, result.truncated, result.status) == (Outcome.TOO_LARGE, "length", 200)
    assert len(result.body) == 1024


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="directory"):
        FileHandler(tmp_path / "missing")


def test_file_urls_are_crawlable_only_when_asked() -> None:
    with pytest.raises(InvalidURL):
        Normalizer()("file:///srv/a.html")
    assert Normalizer(extra_schemes=("file",))("file:///srv/a%7Eb.html#top") == "file:///srv/a~b.html"
    assert url_of(row_key("file:///srv/a.html")) == "file:///srv/a.html"  # the crawl table keys them
