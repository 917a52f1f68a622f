"""Tiers (IIR 7.2.1) and masked documents: tier 2 is searched only when tier 1 gives fewer than k
results, tier 1's results come first, and a masked document is never found nor counted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crawlspace.index.docvalues import DocValues, DocValuesFormatError, live_name
from crawlspace.index.layout import Index, Manifest, build_index, finish_index
from crawlspace.index.stats import CollectionStats
from tests.index.corpora import corpus

DOCUMENTS = corpus(5, 1200)
CUTOFF = 0.8  # the corpus' priors are uniform in [0, 1): a fifth of the pages in tier 1


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Index:
    directory = tmp_path_factory.mktemp("tiered")
    build_index(DOCUMENTS, directory, shards=3, segment_docs=150, tier_prior=CUTOFF)
    with Index(directory) as index:
        yield index


@pytest.fixture(scope="module")
def flat(tmp_path_factory: pytest.TempPathFactory) -> Index:
    directory = tmp_path_factory.mktemp("flat")
    build_index(DOCUMENTS, directory, shards=2, segment_docs=400)
    with Index(directory) as index:
        yield index


def test_pages_above_the_cutoff_are_in_tier_1(tiered: Index) -> None:
    assert len(tiered.tiers) == 2
    for tier, numbers in enumerate(tiered.tiers, 1):
        for number in numbers:
            priors = np.asarray(tiered.segments[number].prior)
            assert (priors >= CUTOFF).all() if tier == 1 else (priors < CUTOFF).all()
    in_tier_1 = sum(tiered.segments[n].docs for n in tiered.tiers[0])
    assert in_tier_1 == sum(d.prior >= CUTOFF for d in DOCUMENTS) > 100


@pytest.mark.parametrize("query", ["w0", "w1 w2", "w5 OR w300", "w3 w10 w40", "w399", '"w0 w1"'])
@pytest.mark.parametrize("k", [1, 10, 200])
def test_tier_2_is_searched_only_when_tier_1_gives_fewer_than_k(tiered: Index, flat: Index, query: str, k: int) -> None:
    everything = flat.search(query, 10_000).hits  # the same collection and statistics, one tier
    first = [hit for hit in everything if hit.url in tier_urls(tiered, 1)]
    second = [hit for hit in everything if hit.url not in tier_urls(tiered, 1)]
    result = tiered.search(query, k)
    assert result.tiers == 2
    if len(first) >= k:
        assert result.tiers_searched == 1
        expected = first[:k]
    else:
        assert result.tiers_searched == 2
        expected = first + second[: k - len(first)]
    assert [hit.url for hit in result.hits] == [hit.url for hit in expected]
    assert [hit.score for hit in result.hits] == pytest.approx([hit.score for hit in expected], rel=1e-12)
    assert [h.url for h in tiered.search(query, k, tiers=False).hits] == [h.url for h in everything[:k]]


def tier_urls(index: Index, tier: int) -> set[str]:
    return {index.segments[n].url(doc) for n in index.tiers[tier - 1] for doc in range(index.segments[n].docs)}


def test_masked_documents_are_not_found_and_not_counted(tmp_path: Path) -> None:
    build_index(DOCUMENTS, tmp_path / "all", shards=2, segment_docs=400)
    gone = {d.url for d in DOCUMENTS[::3]}
    build_index([d for d in DOCUMENTS if d.url not in gone], tmp_path / "rest", shards=2, segment_docs=400)
    root = tmp_path / "all"
    manifest = Manifest.read(root)
    entries = []
    with Index(root) as opened:
        for entry, segment in zip(manifest.segments, opened.segments, strict=True):
            values = DocValues.of(segment)
            deleted = np.array([segment.url(doc) in gone for doc in range(segment.docs)], dtype=bool)
            values = DocValues(deleted, values.prior, values.group, values.key)
            values.write(root / live_name(entry.name, 1), segment)
            entries.append(type(entry)(entry.name, entry.shard, entry.tier, live_name(entry.name, 1)))
    finish_index(root, entries, shards=2, generation=1)
    with Index(root) as masked, Index(tmp_path / "rest") as rest:
        assert masked.stats.doc_count == rest.stats.doc_count == len(DOCUMENTS) - len(gone)
        assert dict(masked.stats.items()) == dict(rest.stats.items())
        assert masked.stats.field_totals == rest.stats.field_totals
        for query in ("w0", "w1 w2", "w5 OR w300", '"w0 w1"', "w7 -w1", "w4 site:h03.test"):
            mine, theirs = masked.search(query, 30), rest.search(query, 30)
            assert [h.url for h in mine.hits] == [h.url for h in theirs.hits]
            assert [h.score for h in mine.hits] == pytest.approx([h.score for h in theirs.hits], rel=1e-12)
            assert not gone & {h.url for h in masked.search(query, 5000).hits}


def test_document_values_of_another_segment_are_refused(tmp_path: Path) -> None:
    build_index(DOCUMENTS[:300], tmp_path, shards=2, segment_docs=400)
    manifest = Manifest.read(tmp_path)
    with Index(tmp_path) as index:
        first, second = index.segments
        DocValues.of(first).write(tmp_path / "values", first)
        with pytest.raises(DocValuesFormatError, match="another segment"):
            DocValues.read(tmp_path / "values", second)
    (tmp_path / "values").write_bytes(b"CSPLIV\x00\x01garbage")
    with Index(tmp_path) as index, pytest.raises(DocValuesFormatError, match="values"):
        DocValues.read(tmp_path / "values", index.segments[0])
    assert isinstance(CollectionStats.read(tmp_path / manifest.stats), CollectionStats)


def test_a_group_shown_from_tier_1_is_not_shown_again_from_tier_2(tmp_path: Path) -> None:
    from crawlspace.index.segment import IndexDocument

    documents = [
        IndexDocument("http://a.test/", "zebra zebra", "zebra crossing", prior=0.9, group="g"),
        IndexDocument("http://b.test/", "zebra", "zebra crossing", prior=0.1, group="g"),  # tier 2, a's copy
        IndexDocument("http://c.test/", "", "zebra", prior=0.1),
        IndexDocument("http://d.test/", "", "horse", prior=0.95),
    ]
    build_index(documents, tmp_path, shards=2, tier_prior=0.5)
    with Index(tmp_path) as index:
        result = index.search("zebra", 2, collapse=True)
        assert [(hit.url, hit.similar) for hit in result.hits] == [("http://a.test/", 1), ("http://c.test/", 0)]
        assert result.tiers_searched == 2
        only = index.search("zebra", 1, collapse=True)
        assert [(hit.url, hit.similar) for hit in only.hits] == [("http://a.test/", 0)] and only.tiers_searched == 1
