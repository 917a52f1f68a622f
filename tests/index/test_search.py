from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlspace.index.docvalues import DocValues
from crawlspace.index.layout import Index, build_index, shard_of
from crawlspace.index.query import parse_query
from crawlspace.index.scoring import BM25F, Bm25fParams
from crawlspace.index.search import Hit, SegmentSearcher
from crawlspace.index.segment import IndexDocument, Segment, SegmentWriter, analyze
from crawlspace.index.stats import CollectionStats
from tests.index.corpora import WORDS, corpus

DOCUMENTS = corpus(11, 2500)
QUERIES = [
    "w0",
    "w1 w2",
    "w3 w10 w40 w77",
    "w1 OR w9 OR w120",
    "w5 OR w300",
    '"w0 w1"',
    '"w2 w0" w7',
    '"w3 w0 w1"',
    '"w1 w1"',
    'w0 -"w1 w2 w3"',
    "w1 -w3",
    'w2 -"w0 w1"',
    "w4 site:h03.test",
    "w0 w1 -site:h01.test",
    "straße café",
    "STRASSE",
    "w399",
    "absent",
    "w0 absent",
    "w0 OR absent",
]


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Index]:
    opened = {}
    for shards in (1, 3, 8):
        directory = tmp_path_factory.mktemp(f"index{shards}")
        build_index(DOCUMENTS, directory, shards=shards, segment_docs=500)
        opened[shards] = Index(directory)
    yield opened
    for index in opened.values():
        index.close()


def brute_force(query_text: str, k: int) -> list[tuple[str, float]]:
    """Every document scored from the tokens themselves, with the collection's statistics."""
    query = parse_query(query_text)
    analyzed = [analyze(d) for d in DOCUMENTS]
    df: dict[str, int] = {}
    for document in analyzed:
        for term in set(itertools.chain.from_iterable(document.fields)):
            df[term] = df.get(term, 0) + 1
    totals = [sum(len(d.fields[f]) for d in analyzed) for f in range(3)]
    scorer = BM25F(CollectionStats.from_counts(len(analyzed), totals, df))

    def contains(fields: tuple[list[str], ...], phrase: tuple[str, ...]) -> bool:
        return any(tuple(terms[i : i + len(phrase)]) == phrase for terms in fields for i in range(len(terms)))

    results = []
    for document in analyzed:
        host = document.url.split("/")[2]
        terms_present = [t for t in query.terms if any(t in f for f in document.fields)]
        if (query.conjunctive and len(terms_present) < len(query.terms)) or not terms_present:
            continue
        if not all(contains(document.fields, p) for p in query.phrases):
            continue
        if any(contains(document.fields, p) for p in query.excluded):
            continue
        if query.sites and not any(host == s or host.endswith("." + s) for s in query.sites):
            continue
        if any(host == s or host.endswith("." + s) for s in query.excluded_sites):
            continue
        lengths = np.array([[len(f) for f in document.fields]], dtype=np.uint32)
        score = 0.0
        for term in query.terms:
            freqs = np.array([[f.count(term) for f in document.fields]], dtype=np.int64)
            if freqs.any():
                score = score + float(scorer.scores(scorer.idf(df[term]), freqs, lengths)[0])
        results.append((document.url, score))
    return sorted(results, key=lambda r: (-r[1], r[0]))[:k]


@pytest.mark.parametrize("query", QUERIES)
def test_shards_rank_exactly_as_one_index(indexes: dict[int, Index], query: str) -> None:
    lists = {
        shards: [(hit.url, hit.score) for hit in index.search(query, 20).hits] for shards, index in indexes.items()
    }
    one = lists[1]
    for shards in (3, 8):
        assert [url for url, _ in lists[shards]] == [url for url, _ in one]
        for (_, score), (_, expected) in zip(lists[shards], one, strict=True):
            assert score == pytest.approx(expected, abs=1e-9)
    expected_list = brute_force(query, 20)
    assert [url for url, _ in one] == [url for url, _ in expected_list]
    for (_, score), (_, expected) in zip(one, expected_list, strict=True):
        assert score == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("query", QUERIES)
def test_pruned_top_k_is_the_exhaustive_top_k(indexes: dict[int, Index], query: str) -> None:
    for index in indexes.values():
        for k in (1, 10, 50):
            pruned = index.search(query, k)
            exhaustive = index.search(query, k, prune=False)
            assert pruned.hits == exhaustive.hits
            assert pruned.counters.postings_scored <= exhaustive.counters.postings_scored


def test_the_statistics_are_global_not_the_shards(indexes: dict[int, Index]) -> None:
    one, eight = indexes[1], indexes[8]
    assert eight.stats.doc_count == one.stats.doc_count == len(DOCUMENTS)
    assert eight.stats.field_totals == one.stats.field_totals
    assert eight.stats.document_frequency("w7") == one.stats.document_frequency("w7") > 0
    assert len(one.segments) == 5 and len(indexes[3].segments) == 6  # shards cut into segments of 500 documents
    local = sum(int(s.term_df[s.terms.ordinal("w7")]) for s in eight.segments if s.terms.ordinal("w7") is not None)
    assert local == one.stats.document_frequency("w7")
    assert all(shard_of(s.url(d), 8) == int(s.path.parent.name[-3:]) for s in eight.segments for d in range(s.docs))


def test_pruning_skips_postings_of_a_disjunctive_query(tmp_path: Path) -> None:
    documents = corpus(5, 20_000, words=40)
    writer = SegmentWriter()
    writer.extend(documents)
    with Segment(writer.write(tmp_path / "big.seg")) as segment:
        searcher = SegmentSearcher(
            segment,
            BM25F(CollectionStats.from_segments([segment])),
        )
        for query, share in (("w0 OR w1 OR w250", 0.5), ("w2 OR w3", 0.8)):
            pruned = searcher.search(query, 10)
            exhaustive = searcher.search(query, 10, prune=False)
            assert pruned.hits == exhaustive.hits
            assert exhaustive.counters.postings_scored == exhaustive.counters.postings_total
            assert pruned.counters.postings_scored < exhaustive.counters.postings_scored * share, pruned.counters


def reference_top_k(
    segment: Segment, scorer: BM25F, terms: list[str], conjunctive: bool, live: np.ndarray, k: int
) -> list[tuple[str, float]]:
    """The top k by scoring every posting of the terms with numpy, independently of the kernel: each
    term's postings decoded whole, its scores by `BM25F.scores`, summed per document in query order."""
    scores: dict[int, float] = {}
    having: dict[int, int] = {}
    for term in dict.fromkeys(terms):
        blocks = segment.term_blocks(term)
        if blocks is None:
            continue
        first, end = blocks
        postings = segment.decode(first, first, end, segment.block_postings[first:end])
        idf = scorer.idf(scorer.stats.document_frequency(term))
        values = scorer.scores(idf, postings.freqs, segment.field_lengths[postings.docs])
        for doc, value in zip(postings.docs.tolist(), values.tolist(), strict=True):
            scores[doc] = scores.get(doc, 0.0) + value
            having[doc] = having.get(doc, 0) + 1
    prior = scorer.prior_scores(segment.prior)
    found = [
        (segment.url(doc), score + (float(prior[doc]) if prior is not None else 0.0))
        for doc, score in scores.items()
        if live[doc] and (not conjunctive or having[doc] == len(set(terms)))
    ]
    return sorted(found, key=lambda r: (-r[1], r[0]))[:k]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    size=st.integers(1, 1500),
    terms=st.lists(st.sampled_from(WORDS[:60]), min_size=1, max_size=4),
    disjunctive=st.booleans(),
    k=st.integers(1, 30),
    prior_weight=st.sampled_from([0.0, 0.5]),
    masked=st.sampled_from([0.0, 0.3]),
)
def test_pruning_never_changes_the_top_k(
    tmp_path: Path,
    seed: int,
    size: int,
    terms: list[str],
    disjunctive: bool,
    k: int,
    prior_weight: float,
    masked: float,
) -> None:
    """Block-max pruning against the same kernel unpruned and against numpy scoring every posting."""
    writer = SegmentWriter()
    writer.extend(corpus(seed, size, words=20))
    path = writer.write(tmp_path / f"p{seed}.seg")
    with Segment(path) as segment:
        scorer = BM25F(
            CollectionStats.from_segments([segment]), Bm25fParams(weights=(3.0, 1.0, 0.5), prior_weight=prior_weight)
        )
        deleted = np.random.default_rng(seed).random(segment.docs) < masked
        values = DocValues(
            deleted, np.asarray(segment.prior), np.asarray(segment.doc_group), np.zeros(segment.docs, np.uint64)
        )
        searcher = SegmentSearcher(segment, scorer, values=values)
        query = (" OR " if disjunctive else " ").join(terms)
        pruned = searcher.search(query, k)
        exhaustive = searcher.search(query, k, prune=False)
        assert pruned.hits == exhaustive.hits
        expected = reference_top_k(segment, scorer, terms, not disjunctive, ~deleted, k)
        assert [hit.url for hit in pruned.hits] == [url for url, _ in expected]
        for hit, (_, score) in zip(pruned.hits, expected, strict=True):
            assert hit.score == pytest.approx(score, rel=1e-12)
        if disjunctive and not masked:
            assert exhaustive.counters.postings_scored == exhaustive.counters.postings_total


def test_an_index_without_manifest_is_refused(tmp_path: Path) -> None:
    from crawlspace.index.container import IndexFormatError

    with pytest.raises(IndexFormatError, match=r"no manifest\.json"):
        Index(tmp_path)


def test_block_bounds_are_kept_beside_the_segment_and_rebuilt_when_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crawlspace.index import bounds
    from crawlspace.index.scoring import block_max_tfn

    writer = SegmentWriter()
    writer.extend(corpus(8, 300))
    with Segment(writer.write(tmp_path / "b.seg")) as segment:
        scorer = BM25F(CollectionStats.from_segments([segment]))
        expected = block_max_tfn(segment, scorer).tolist()
        cached = bounds.bounds_path(segment, scorer)
        assert not cached.exists()
        assert bounds.block_bounds(segment, scorer).tolist() == expected
        assert cached.exists()
        with monkeypatch.context() as patch:
            patch.setattr(bounds, "block_max_tfn", lambda *_: pytest.fail("computed although cached"))
            assert bounds.block_bounds(segment, scorer).tolist() == expected
        cached.write_bytes(cached.read_bytes()[:-3])  # damaged: computed again, and rewritten
        assert bounds.block_bounds(segment, scorer).tolist() == expected
        other = BM25F(scorer.stats, Bm25fParams(k1=2.0, b=(0.5, 0.5, 0.5)))
        assert bounds.bounds_path(segment, other) != cached
    writer = SegmentWriter()
    writer.extend(corpus(9, 300))  # another segment at the same path: the old file is not taken for it
    with Segment(writer.write(tmp_path / "b.seg")) as segment:
        assert cached.exists() and bounds.bounds_path(segment, scorer) == cached
        assert bounds.block_bounds(segment, scorer).tolist() == block_max_tfn(segment, scorer).tolist()


def test_the_pagerank_prior_adds_to_the_score_and_keeps_shards_and_pruning_exact(
    indexes: dict[int, Index],
) -> None:
    import math

    params = Bm25fParams(prior_weight=0.3)
    with_prior = {shards: Index(index.directory, params=params) for shards, index in indexes.items()}
    try:
        for query in ("w1 w2", "w1 OR w9 OR w120", '"w0 w1"', "w4 site:h03.test"):
            lists = {s: [(h.url, h.score) for h in ix.search(query, 20).hits] for s, ix in with_prior.items()}
            assert [u for u, _ in lists[3]] == [u for u, _ in lists[1]] == [u for u, _ in lists[8]]
            for shards in (3, 8):
                assert [s for _, s in lists[shards]] == pytest.approx([s for _, s in lists[1]], abs=1e-9)
            for index in with_prior.values():
                assert index.search(query, 7).hits == index.search(query, 7, prune=False).hits
        plain = {h.url: h.score for h in indexes[1].search("w1 OR w9", 3000, prune=False).hits}
        boosted = with_prior[1].search("w1 OR w9", 50, prune=False).hits
        prior_of = {d.url: d.prior for d in DOCUMENTS}
        checked = 0
        for hit in boosted:
            if hit.url in plain:
                rank = float(np.float32(prior_of[hit.url]))
                assert hit.score - plain[hit.url] == pytest.approx(0.3 * math.log1p(rank * len(DOCUMENTS)), rel=1e-9)
                checked += 1
        assert checked == len(boosted) == 50
        assert [h.url for h in boosted[:10]] != list(plain)[:10]
    finally:
        for index in with_prior.values():
            index.close()


def test_an_index_of_no_documents_answers_nothing(tmp_path: Path) -> None:
    build_index([], tmp_path, shards=3)
    with Index(tmp_path) as index:
        assert index.stats.doc_count == 0 and len(index.segments) == 3
        assert index.search("anything OR else", 10).hits == []


def test_queries_without_terms_or_k_give_nothing(indexes: dict[int, Index]) -> None:
    index = indexes[3]
    for query in ("", "-w1", "site:h01.test", "!!! ...", '""'):
        assert index.search(query, 10).hits == []
    assert index.search("w1", 0).hits == []


@pytest.mark.parametrize("query", ["w1 w2", "w1 OR w9 OR w120", '"w0 w1" w7', "straße café"])
def test_an_explanation_adds_up_to_the_score(indexes: dict[int, Index], query: str) -> None:
    index = indexes[3]
    hits = index.search(query, 5).hits
    assert hits
    for hit in hits:
        explained = index.explain(hit, query)
        assert explained.url == hit.url and explained.score == pytest.approx(hit.score, rel=1e-12)
        for part in explained.terms:
            assert sum(part.fields) == pytest.approx(part.score, rel=1e-9)
            assert any(part.freqs) and part.score > 0
        assert {part.term for part in explained.terms} <= set(parse_query(query).terms)


def test_collapsing_keeps_the_best_page_of_each_group(tmp_path: Path) -> None:
    import msgspec

    documents = [
        msgspec.structs.replace(document, group=f"g{number % 5}" if number < 600 else "")
        for number, document in enumerate(corpus(12, 1500))
    ]
    opened = []
    for shards in (1, 3):
        build_index(documents, tmp_path / str(shards), shards=shards)
        opened.append(Index(tmp_path / str(shards)))
    try:
        for query in ("w1 OR w5", "w2 w3", '"w0 w1"'):
            everything = opened[0].search(query, 1500, prune=False).hits
            firsts: dict[int, Hit] = {}
            for hit in everything:
                firsts.setdefault(hit.group, hit)
            expected = [hit.url for hit in list(firsts.values())[:10]]
            for index in opened:
                collapsed = index.search(query, 10, collapse=True).hits
                assert [hit.url for hit in collapsed] == expected
                assert len({hit.group for hit in collapsed}) == len(collapsed)
                members = {group: sum(1 for hit in everything if hit.group == group) for group in firsts}
                assert all(0 <= hit.similar < members[hit.group] for hit in collapsed)
                assert any(hit.similar > 0 for hit in collapsed)
                alone = [hit for hit in collapsed if not documents_by_url(documents)[hit.url].group]
                assert all(hit.similar == 0 for hit in alone)
    finally:
        for index in opened:
            index.close()


def documents_by_url(documents: list[IndexDocument]) -> dict[str, IndexDocument]:
    return {document.url: document for document in documents}
