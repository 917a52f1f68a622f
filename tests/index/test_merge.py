"""Merging segments: an index updated k times (new segments, old copies masked) and then merged ranks
exactly as an index built at once from the final pages, and holds no masked document any more."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from crawlspace.index.docvalues import DocValues, live_name
from crawlspace.index.layout import Index, Manifest, SegmentEntry, build_index, finish_index, segment_name, shard_of
from crawlspace.index.merge import MergePolicy, merge_index
from crawlspace.index.segment import IndexDocument, Segment, SegmentWriter
from tests.index.corpora import corpus

SHARDS = 2
QUERIES = ["w0", "w1 w2", "w3 OR w10 OR w40", '"w0 w1"', "w2 -w3", "w5 w6 w7", "w4 site:h03.test", "w77 OR w120"]


def update(root: Path, documents: dict[str, IndexDocument], changed: list[IndexDocument], generation: int) -> None:
    """One incremental generation the way the index job makes it: the changed pages written as new
    segments, their old copies masked in every older segment's document values."""
    manifest = Manifest.read(root)
    urls = {document.url for document in changed}
    entries: list[SegmentEntry] = []
    for entry in manifest.segments:
        with Segment(root / entry.name) as segment:
            values = DocValues.read(root / entry.live, segment) if entry.live else DocValues.of(segment)
            deleted = values.deleted.copy()
            for doc in range(segment.docs):
                deleted[doc] |= segment.url(doc) in urls
            live = live_name(entry.name, generation)
            DocValues(deleted, values.prior, values.group, values.key).write(root / live, segment)
        entries.append(SegmentEntry(entry.name, entry.shard, entry.tier, live))
    for shard in range(SHARDS):
        writer = SegmentWriter()
        writer.extend(d for d in changed if shard_of(d.url, SHARDS) == shard)
        if len(writer):
            name = segment_name(shard, 0, generation=generation)
            writer.write(root / name)
            entries.append(SegmentEntry(name, shard, 1))
    for document in changed:
        documents[document.url] = document
    finish_index(root, entries, shards=SHARDS, generation=generation)


def test_updates_then_a_merge_rank_exactly_as_a_rebuild(tmp_path: Path) -> None:
    first = corpus(21, 500)
    documents = {d.url: d for d in first}
    root = tmp_path / "updated"
    build_index(first, root, shards=SHARDS, segment_docs=120)
    for generation in (1, 2, 3):  # each update: 60 pages refetched with another text, 30 new ones
        other = corpus(100 + generation, 90)
        changed = [
            msgspec.structs.replace(d, text=o.text) for d, o in zip(first[generation::7][:60], other, strict=False)
        ]
        changed += [msgspec.structs.replace(o, url=f"{o.url}-new-{generation}") for o in other[60:]]
        update(root, documents, changed, generation)
    before = Manifest.read(root)
    report = merge_index(root, before.segments, 4, MergePolicy(max_docs=1000), force=True)
    finish_index(root, report.entries, shards=SHARDS, generation=4)
    assert len(report.entries) == SHARDS and len(report.dropped) == len(before.segments)  # one segment per shard
    assert report.reclaimed == 3 * 60
    rebuilt = tmp_path / "rebuilt"
    build_index(list(documents.values()), rebuilt, shards=SHARDS, segment_docs=120)

    with Index(root) as merged, Index(rebuilt) as full:
        assert len(merged.segments) == SHARDS
        assert all(s.live is None for s in merged.searchers)  # nothing masked is left on disk
        assert sum(s.docs for s in merged.segments) == len(documents)
        assert merged.stats.doc_count == full.stats.doc_count == len(documents)
        assert merged.stats.field_totals == full.stats.field_totals
        assert dict(merged.stats.items()) == dict(full.stats.items())
        for query in QUERIES:
            mine, theirs = merged.search(query, 20).hits, full.search(query, 20).hits
            assert [h.url for h in mine] == [h.url for h in theirs], query
            assert len(mine) > 0
            for a, b in zip(mine, theirs, strict=True):
                assert a.score == pytest.approx(b.score, rel=1e-9, abs=1e-9)
                assert a.group == b.group
            explained = merged.explain(mine[0], query)
            assert explained.score == pytest.approx(mine[0].score, rel=1e-12)


def test_the_policy_merges_segments_of_one_size_class_and_reclaims_deletes() -> None:
    policy = MergePolicy(factor=4, floor_docs=100, max_docs=10_000)
    small = [(50, 50)] * 3 + [(80, 80)]  # four in class 0: merged, smallest first
    assert policy.plan(small) == [[0, 1, 2, 3]]
    assert policy.plan(small[:3]) == []  # three are not enough
    mixed = [(5000, 5000), (90, 100), (450, 500), (40, 400)]  # classes 2, 0, 1, 0; the last mostly masked
    assert policy.plan(mixed) == [[3]]
    assert policy.plan([(3000, 3000)] * 4) == [[0, 1, 2]]  # all four would exceed max_docs
    assert policy.plan([(2000, 2000)] * 4) == [[0, 1, 2, 3]]
    forced = policy.plan([(10_000, 10_000), (6000, 6000), (6000, 6500), (10, 10)], force=True)
    assert forced == [[3, 1], [2]]  # a full segment without deletes stays; the rest packed below max_docs
    with pytest.raises(ValueError, match="merge policy"):
        MergePolicy(factor=1)
