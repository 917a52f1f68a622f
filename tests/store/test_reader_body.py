"""`CrawlReader.body`: the decoded body a page was served with, a revisit record followed to the response
it names (what the batch jobs hash and shingle), None where there is no body to give."""

from __future__ import annotations

import base64
import gzip
import hashlib
from pathlib import Path

from crawlspace.store.reader import CrawlReader
from tests.store.builders import fetch_result, html_page, parsed
from tests.store.test_pagestore import store_at

A = "http://a.test/"
B = "http://b.test/copy"
C = "http://c.test/missing"


def sha1_base32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def test_a_response_a_revisit_a_gzipped_body_and_pages_without_one(tmp_path: Path) -> None:
    body = html_page("Same", "same text", [])
    zipped = html_page("Zipped", "zipped text", [])
    with store_at(tmp_path) as store:
        store.record(fetch_result(A, body, started=1e9), page=parsed("Same", "same text", []), fingerprint=5)
        store.record_duplicate(fetch_result(B, body, started=1e9 + 1), A, 1e9, fingerprint=5)
        store.record_duplicate(fetch_result(C, b"<html>x</html>", started=1e9 + 2), "http://elsewhere.test/", 1e9)
        store.record(
            fetch_result(
                "http://z.test/", gzip.compress(zipped, mtime=0), extra_headers=[("Content-Encoding", "gzip")]
            ),
            fingerprint=7,
        )
        store.record(fetch_result("http://a.test/gone", b"not here", status=404), fingerprint=8)
    with CrawlReader(tmp_path) as reader:
        pages = {page.url: page for page in reader.pages()}
        own = reader.body(pages[A])
        assert own is not None and own.content == body and not own.revisit and own.stored_as == A
        assert own.payload_digest == own.stored_digest == sha1_base32(body)
        copy = reader.body(pages[B])
        assert copy is not None and copy.content == body and copy.revisit and copy.stored_as == A
        assert copy.payload_digest == copy.stored_digest  # the revisit's claim holds
        assert reader.body(pages[C]) is None  # refers to a response no directory holds
        decoded = reader.body(pages["http://z.test/"])
        assert decoded is not None and decoded.content == zipped and decoded.content_type == "text/html"
        assert reader.body(pages["http://a.test/gone"]) is None  # not a 200
