"""Merging segments (IIR 4.5's logarithmic merge, Lucene's tiered policy): fewer segments per query,
masked documents dropped from disk.

An incremental build adds a segment per shard and tier each run and masks the old copies of changed
pages, so without merging an index's segments and dead documents only grow. `MergePolicy.plan` picks,
within one shard and tier, groups of segments to rewrite as one:
- size classes: a segment's class is floor(log_factor(live / floor_docs)) (every segment below
  `floor_docs` live documents in class 0), and `factor` segments of one class are merged into one
  (of the next class, about), the smallest first, so each document is rewritten O(log n) times;
- a segment with more than `deletes_share` of its documents masked is rewritten even alone;
- a merged segment never holds more than `max_docs` documents (the writer keeps a segment in memory).
`force=True` (`crawlspace index DIR --merge`) merges every shard and tier into as few segments as
`max_docs` allows, leaving alone a full segment with nothing masked.

`merge_segments` reads the live documents of its segments back out of their postings (each term's
doc ids, frequencies and positions, inverted again into each document's field terms in position
order, with whole-array steps), writes them through `SegmentWriter.add_inverted`, and gives the new
segment its document values (prior, group and version key carried over, nothing masked). The terms,
positions and field lengths of a document are exactly those it was written with, so a merged index
ranks as an index built at once. Crash safety is the caller's: merges write new files only, into the
directory of a new generation that the index job swaps in whole (`jobs.output.PendingOutput`), so a
merge killed at any point leaves the index as it was.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from crawlspace.index.codec import decode_varints
from crawlspace.index.docvalues import DocValues, live_name
from crawlspace.index.layout import SegmentEntry, segment_name
from crawlspace.index.segment import FIELDS, Segment, SegmentFormatError, SegmentWriter

__all__ = ["MergePolicy", "MergeReport", "merge_index", "merge_segments"]

I64Array = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class MergePolicy:
    factor: int = 8
    floor_docs: int = 1000
    max_docs: int = 25_000
    deletes_share: float = 0.5

    def __post_init__(self) -> None:
        if self.factor < 2 or self.floor_docs < 1 or self.max_docs < 1 or not 0 < self.deletes_share <= 1:
            raise ValueError(f"merge policy out of range: {self}")

    def size_class(self, live: int) -> int:
        return int(math.log(max(live, self.floor_docs) / self.floor_docs, self.factor))

    def plan(self, sizes: Sequence[tuple[int, int]], *, force: bool = False) -> list[list[int]]:
        """Groups of segments to merge, as indexes into `sizes`: (live documents, documents) of
        each segment of one shard and tier. A group of one is a segment rewritten for its deletes."""
        order = sorted(range(len(sizes)), key=lambda i: (sizes[i][0], i))
        if force:
            candidates = [i for i in order if not (sizes[i][0] >= self.max_docs and sizes[i][0] == sizes[i][1])]
            return [group for group in self._packed(candidates, sizes) if len(group) > 1 or _masked(sizes[group[0]])]
        groups: list[list[int]] = []
        taken: set[int] = set()
        by_class: dict[int, list[int]] = {}
        for i in order:
            if sizes[i][0] < self.max_docs:
                by_class.setdefault(self.size_class(sizes[i][0]), []).append(i)
        for members in by_class.values():
            while len(members) >= self.factor:
                group: list[int] = []
                total = 0
                for i in members:
                    if len(group) == self.factor or total + sizes[i][0] > self.max_docs:
                        break
                    group.append(i)
                    total += sizes[i][0]
                if len(group) < 2:
                    break
                groups.append(group)
                taken.update(group)
                members = [i for i in members if i not in taken]
        for i in order:
            live, docs = sizes[i]
            if i not in taken and docs and (docs - live) > self.deletes_share * docs:
                groups.append([i])
        return groups

    def _packed(self, members: list[int], sizes: Sequence[tuple[int, int]]) -> list[list[int]]:
        groups: list[list[int]] = []
        group: list[int] = []
        total = 0
        for i in members:
            if group and total + sizes[i][0] > self.max_docs:
                groups.append(group)
                group, total = [], 0
            group.append(i)
            total += sizes[i][0]
        if group:
            groups.append(group)
        return groups


def _masked(size: tuple[int, int]) -> bool:
    return size[0] < size[1]


def merge_segments(
    sources: Sequence[tuple[Segment, DocValues]], root: Path, name: str, generation: int
) -> tuple[SegmentEntry | None, int]:
    """Writes the live documents of `sources` as segment `name` (relative to `root`) with its document
    values of `generation`; returns its entry (shard and tier left to the caller; None when nothing was
    live) and how many documents it holds."""
    writer = SegmentWriter()
    priors: list[float] = []
    groups: list[int] = []
    keys: list[int] = []
    for segment, values in sources:
        live = ~values.deleted
        if not live.any():
            continue
        vocabulary, occurrences = _occurrences(segment, live)
        docs = np.flatnonzero(live)
        renumber = np.full(segment.docs, -1, dtype=np.int64)
        renumber[docs] = np.arange(docs.size)
        term, doc, field, position = occurrences
        writer.add_inverted(
            vocabulary,
            (term, renumber[doc], field, position),
            segment.field_lengths[docs],
            [segment.url(int(d)) for d in docs],
            [segment.title(int(d)) for d in docs],
            values.prior[docs].tolist(),
            values.group[docs].tolist(),
        )
        priors += values.prior[docs].tolist()
        groups += values.group[docs].tolist()
        keys += values.key[docs].tolist()
    if not len(writer):
        return None, 0
    path = writer.write(root / name)
    live_file = live_name(name, generation)
    with Segment(path) as merged:
        DocValues(
            np.zeros(merged.docs, dtype=bool),
            np.array(priors, dtype=np.float32),
            np.array(groups, dtype=np.uint64),
            np.array(keys, dtype=np.uint64),
        ).write(root / live_file, merged)
    return SegmentEntry(name, 0, 1, live_file), len(writer)


def _occurrences(
    segment: Segment, live: npt.NDArray[np.bool_]
) -> tuple[list[str], tuple[I64Array, I64Array, I64Array, I64Array]]:
    """Every term occurrence of the live documents, (term, doc, field, position) in (doc, field,
    position) order, read back out of the postings; and the segment's terms by ordinal."""
    vocabulary = list(segment.terms)
    if not segment.block_count:
        empty = np.zeros(0, dtype=np.int64)
        return vocabulary, (empty, empty, empty, empty)
    docs, freqs, block_of = segment.all_postings(0, segment.block_count)
    first_block = segment.term_first_block.astype(np.int64)
    blocks_of_term = first_block[1:] - first_block[:-1]
    term_of_block = np.repeat(np.arange(segment.term_count), blocks_of_term)
    posting_term = term_of_block[block_of]
    counts = freqs.ravel()  # posting-major, field-minor: the order of the position stream
    gaps = decode_varints(segment.position_stream(), int(counts.sum()), dtype=np.int64)
    group_start = np.cumsum(counts) - counts
    running = np.cumsum(gaps)
    before = np.where(group_start > 0, running[np.maximum(group_start - 1, 0)], 0)
    position = running - np.repeat(before, counts.astype(np.int64))
    occurrence_posting = np.repeat(np.arange(docs.size), freqs.sum(axis=1))
    field = np.repeat(np.tile(np.arange(len(FIELDS)), docs.size), counts)
    doc = docs[occurrence_posting]
    term = posting_term[occurrence_posting]
    keep = live[doc]
    term, doc, field, position = term[keep], doc[keep], field[keep], position[keep]
    order = np.lexsort((position, field, doc))
    term, doc, field, position = term[order], doc[order], field[order], position[order]
    lengths = segment.field_lengths[live].astype(np.int64).ravel()
    expected = np.concatenate([np.arange(n) for n in lengths.tolist()]) if lengths.size else lengths
    if expected.size != position.size or not np.array_equal(expected, position):
        raise SegmentFormatError(f"{segment.path}: its positions do not cover its field lengths")
    return vocabulary, (term, doc, field, position)


@dataclass(frozen=True, slots=True)
class MergeReport:
    entries: list[SegmentEntry]
    """The index's segments after the merges: those left alone, then the merged ones."""
    dropped: list[SegmentEntry]
    """The segments merged away (their files are the caller's to remove)."""
    reclaimed: int
    """Masked documents the merges dropped."""


def merge_index(
    root: Path,
    entries: Sequence[SegmentEntry],
    generation: int,
    policy: MergePolicy | None = None,
    *,
    force: bool = False,
) -> MergeReport:
    """Merges what `policy` picks in each shard and tier of `entries` (`force`: everything it can),
    the merged segments written under `root` as `generation`'s."""
    policy = policy or MergePolicy()
    kept: list[SegmentEntry] = []
    merged: list[SegmentEntry] = []
    dropped: list[SegmentEntry] = []
    reclaimed = 0
    taken = {entry.name for entry in entries}
    for shard, tier in sorted({(entry.shard, entry.tier) for entry in entries}):
        members = [entry for entry in entries if (entry.shard, entry.tier) == (shard, tier)]
        opened = [Segment(root / entry.name) for entry in members]
        try:
            values = [
                DocValues.read(root / entry.live, segment) if entry.live else DocValues.of(segment)
                for entry, segment in zip(members, opened, strict=True)
            ]
            plan = policy.plan([(v.live, s.docs) for v, s in zip(values, opened, strict=True)], force=force)
            grouped = {i for group in plan for i in group}
            kept += [entry for i, entry in enumerate(members) if i not in grouped]
            dropped += [entry for i, entry in enumerate(members) if i in grouped]
            reclaimed += sum(opened[i].docs - values[i].live for i in grouped)
            number = 0
            for group in plan:
                while (name := segment_name(shard, number, generation=generation, tier=tier)) in taken:
                    number += 1
                taken.add(name)
                entry, _ = merge_segments([(opened[i], values[i]) for i in group], root, name, generation)
                if entry is not None:
                    merged.append(SegmentEntry(entry.name, shard, tier, entry.live))
        finally:
            for segment in opened:
                segment.close()
    return MergeReport(kept + merged, dropped, reclaimed)
