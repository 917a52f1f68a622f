"""The bulk lines of one page: a hostile page cannot break a line or forge an action."""

from __future__ import annotations

import json

from crawlspace.index.opensearch import bulk_lines, document_id

HOSTILE = 'a "quoted" \\ back\nslash\r\n{"index":{"_id":"x"}}\n\u2028\u2029\x00\x1b[31m </script> 東京 \U0001f600'


def test_a_page_is_two_lines_of_json_whatever_it_contains() -> None:
    document = {"url": 'http://h.test/a?b="c"\n', "title": HOSTILE, "text": HOSTILE * 3, "anchors": [HOSTILE]}
    lines = bulk_lines(document, "crawlspace").split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3
    action, back = json.loads(lines[0]), json.loads(lines[1])
    assert action == {"index": {"_index": "crawlspace", "_id": document_id(document["url"])}}
    assert back == document
    assert b"\r" not in lines[1] and b"\x00" not in lines[1] and b"\x1b" not in lines[1]


def test_ids_are_stable_short_and_distinct() -> None:
    assert document_id("http://h.test/") == document_id("http://h.test/")
    assert document_id("http://h.test/") != document_id("http://h.test/a")
    assert len(document_id("http://h.test/" + "x" * 5000)) == 32
    assert all(c in "0123456789abcdef" for c in document_id("http://h.test/\ud800"))


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    lines = bulk_lines({"url": "http://h.test/", "title": "a\ud800b"}, "crawlspace").split(b"\n")
    assert json.loads(lines[1])["title"] == "a\ufffdb"
