"""Global statistics: what BM25F needs of the whole collection, kept apart from any one shard.

IIR 20.3: with document partitioning, idf computed from a shard's own documents makes the same page
score differently in another shard. So the statistics job (`CollectionStats.from_segments`) adds up
every segment's local counts (document count, field length totals, each term's document frequency:
sums, exactly, because a document is in one segment only) into one file stored beside the shards,
and every shard scores with it, so S shards rank exactly as one index would.

The file is a container (`container`): header with the document count and the field length totals;
sections: the front-coded terms and each term's document frequency (u64).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from crawlspace.index.container import IndexFormatError, SectionSpec, open_container, write_container
from crawlspace.index.segment import FIELDS, Segment
from crawlspace.index.terms import BLOCK_TERMS, TermDictionary, TermDictionaryError, encode_terms
from crawlspace.index.tokens import TOKENIZER_VERSION

__all__ = ["CollectionStats", "StatsFormatError"]

MAGIC: Final = b"CSPSTA\x00"
VERSION: Final = 1
_SECTIONS: Final[SectionSpec] = {
    "term_bytes": ("|u1", None),
    "term_block_offsets": ("<u8", lambda h: (h["terms"] + BLOCK_TERMS - 1) // BLOCK_TERMS + 1),
    "df": ("<u8", lambda h: h["terms"]),
}


_RECENT_TERMS: Final = 65_536
_CHUNK_BLOCKS: Final = 8192


def live_document_frequencies(segment: Segment, deleted: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Each term's document frequency in `segment` without the `deleted` documents: a pass over the
    segment's postings (the segment's own counts include them), a chunk of blocks at a time."""
    first_blocks = segment.term_first_block.astype(np.int64)
    blocks_per_term = first_blocks[1:] - first_blocks[:-1]
    term_of_block = np.repeat(np.arange(segment.term_count, dtype=np.int64), blocks_per_term)
    df = np.zeros(segment.term_count, dtype=np.int64)
    for low in range(0, segment.block_count, _CHUNK_BLOCKS):
        high = min(low + _CHUNK_BLOCKS, segment.block_count)
        docs, _, block_of = segment.all_postings(low, high)
        df += np.bincount(term_of_block[block_of[~deleted[docs]]], minlength=segment.term_count)
    return df


class StatsFormatError(IndexFormatError):
    """A statistics file that cannot be read."""


class CollectionStats:
    """Document count, total length of each field and the document frequency of each term."""

    def __init__(self, doc_count: int, field_totals: Iterable[int], terms: TermDictionary, df: npt.NDArray[np.uint64]):
        self.doc_count = doc_count
        self.field_totals = tuple(int(total) for total in field_totals)
        if len(self.field_totals) != len(FIELDS):
            raise ValueError(f"{len(self.field_totals)} field totals for {len(FIELDS)} fields")
        self._terms = terms
        self._df = df
        self._recent: dict[str, int] = {}
        self.average_lengths = tuple(total / doc_count if doc_count else 0.0 for total in self.field_totals)
        """Average length of each field over all documents (0 for an empty collection)."""

    def document_frequency(self, term: str) -> int:
        """In how many documents `term` occurs in any field (remembered: every segment asks for the
        terms of each query)."""
        known = self._recent.get(term)
        if known is None:
            ordinal = self._terms.ordinal(term)
            known = 0 if ordinal is None else int(self._df[ordinal])
            if len(self._recent) >= _RECENT_TERMS:
                self._recent.clear()
            self._recent[term] = known
        return known

    def __len__(self) -> int:
        return len(self._terms)

    def items(self) -> Iterable[tuple[str, int]]:
        return zip(self._terms, (int(df) for df in self._df), strict=True)

    def __repr__(self) -> str:
        return f"CollectionStats(docs={self.doc_count}, terms={len(self)}, field_totals={self.field_totals})"

    @classmethod
    def from_counts(cls, doc_count: int, field_totals: Iterable[int], df: dict[str, int]) -> CollectionStats:
        ordered = sorted(df)
        data, offsets = encode_terms(ordered)
        frequencies = np.array([df[term] for term in ordered], dtype=np.uint64)
        return cls(doc_count, field_totals, TermDictionary(data, offsets, len(ordered)), frequencies)

    @classmethod
    def from_segments(
        cls, segments: Iterable[Segment], deleted: Iterable[npt.NDArray[np.bool_] | None] | None = None
    ) -> CollectionStats:
        """The statistics of the collection the segments hold (each live document in exactly one of
        them); `deleted`: per segment, the documents masked in it (None: none), left out of every count."""
        df: dict[str, int] = {}
        docs = 0
        totals = np.zeros(len(FIELDS), dtype=np.int64)
        masks = iter(deleted) if deleted is not None else None
        for segment in segments:
            mask = next(masks) if masks is not None else None
            if mask is not None and mask.any():
                live = ~mask
                docs += int(live.sum())
                totals += segment.field_lengths[live].sum(axis=0, dtype=np.int64)
                term_df = live_document_frequencies(segment, mask)
            else:
                docs += segment.docs
                totals += segment.field_lengths.sum(axis=0, dtype=np.int64)
                term_df = segment.term_df
            get = df.get
            for term, count in zip(segment.terms, term_df.tolist(), strict=True):
                if count:
                    df[term] = get(term, 0) + count
        return cls.from_counts(docs, totals.tolist(), df)

    def write(self, path: str | Path) -> Path:
        ordered = list(self._terms)
        data, offsets = encode_terms(ordered)
        header: dict[str, Any] = {
            "tokenizer": TOKENIZER_VERSION,
            "fields": list(FIELDS),
            "docs": self.doc_count,
            "field_totals": list(self.field_totals),
            "terms": len(ordered),
        }
        sections: dict[str, npt.NDArray[Any]] = {
            "term_bytes": np.frombuffer(data, dtype=np.uint8),
            "term_block_offsets": offsets,
            "df": np.ascontiguousarray(self._df, dtype=np.uint64),
        }
        return write_container(Path(path), MAGIC, VERSION, header, sections)

    @classmethod
    def read(cls, path: str | Path) -> CollectionStats:
        path = Path(path)
        container = open_container(
            path,
            magic=MAGIC,
            version=VERSION,
            kind="crawlspace index statistics",
            spec=_SECTIONS,
            error=StatsFormatError,
        )
        header, sections = container.header, container.sections
        try:
            if header.get("tokenizer") != TOKENIZER_VERSION or header.get("fields") != list(FIELDS):
                raise StatsFormatError(f"{path}: made with another tokenizer or other fields: rebuild the index")
            terms = TermDictionary(sections["term_bytes"].data, sections["term_block_offsets"], int(header["terms"]))
            stats = cls(int(header["docs"]), header["field_totals"], terms, sections["df"])
        except (TermDictionaryError, ValueError, KeyError, TypeError) as exc:
            container.close()
            if isinstance(exc, StatsFormatError):
                raise
            raise StatsFormatError(f"{path}: damaged: {exc}") from exc
        if stats._df.size and int(stats._df.max()) > stats.doc_count:
            raise StatsFormatError(f"{path}: a document frequency exceeds the document count")
        return stats
