"""A document outside the index scored as the index would score it (index.rescore)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlspace.index import Index, IndexDocument, build_index, parse_query
from crawlspace.index.rescore import score_document

DOCUMENTS = [
    IndexDocument("http://a.test/", "apple pie", "a warm apple pie with cinnamon", "best pie"),
    IndexDocument("http://b.test/", "apple tart", "an apple tart and a pie", ""),
    IndexDocument("http://c.test/", "pear", "pear juice, no apple at all", "juice"),
]


def test_an_indexed_document_rescored_gets_its_search_score_and_the_same_matches(tmp_path: Path) -> None:
    build_index(DOCUMENTS, tmp_path / "index", shards=2)
    with Index(tmp_path / "index") as index:
        for text in ("apple", "apple pie", '"apple tart"', "pie -tart", "pear OR tart", "juice"):
            query = parse_query(text)
            hits = {hit.url: hit.score for hit in index.search(query, 10).hits}
            for document in DOCUMENTS:
                score = score_document(index.scorer, query, document)
                if document.url in hits:
                    assert score == pytest.approx(hits[document.url], rel=1e-9), (text, document.url)
                else:
                    assert score is None, (text, document.url)
        changed = IndexDocument("http://c.test/", "pear", "apple pie, now with pears", "juice")
        assert score_document(index.scorer, parse_query('"apple pie"'), changed) is not None
