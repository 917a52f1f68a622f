"""An index segment: the postings, field lengths and doc table of a set of documents, in one file.

Who writes it: `SegmentWriter`, fed `IndexDocument`s (or documents already cut into terms by
`analyze`, which is what the map side of the build job will hand over) by the build job, one writer
per shard (or per batch of a shard's documents: a shard may hold several segments). Who reads it:
`Segment`, memory-mapped, by the query side (`search`) and by the statistics job (`stats`).

The file (all integers little-endian):

    magic "CSPSEG\\0" + version byte, u64 header length, header (JSON), sections, each 8-aligned
    header: counts (docs, terms, postings, blocks), fields, tokenizer version, and per section its
            offset, length, dtype and xxh3-64 checksum

Documents get local ids 0..docs-1 in the order they were added. A term's postings are sorted by
doc id and cut into blocks of `BLOCK_POSTINGS`; each block stores, in four variable-byte coded
streams (`codec`): its doc-id gaps (the first from the previous block's last doc, or from -1); per
posting one frequency code (text frequency << 2 | title present << 1 | anchor present); the title
and anchor frequencies of the postings that have them, in posting order (most have neither, so
frequencies cost about one byte a posting); per posting and field the gaps between the term's
positions. The block table holds each block's last doc id and where its codes end in each stream,
so a query decodes only the blocks it needs and skips by doc id without decoding.
Beside the postings: the front-coded term dictionary (`terms`), each term's document frequency
and first block, the field lengths of each document (in terms), and the doc table (URL, title,
host, PageRank prior, group key: near-duplicates share one).

Invariants checked on opening (a file that fails one gives `SegmentFormatError` naming it, never an
exception from deep in numpy): the magic, version and tokenizer; every section inside the file with
the size its count and dtype imply and its checksum; blocks per term = ceil(df / BLOCK_POSTINGS);
block offsets non-decreasing and ending at each stream's end.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt
import xxhash

from crawlspace.index.codec import CodecError, decode_varints, encode_varints, varint_lengths
from crawlspace.index.container import IndexFormatError, SectionSpec, open_container, write_container
from crawlspace.index.terms import BLOCK_TERMS, TermDictionary, TermDictionaryError, encode_terms
from crawlspace.index.tokens import TOKENIZER_VERSION, tokenize
from crawlspace.urls.normalize import host_of

__all__ = [
    "BLOCK_POSTINGS",
    "FIELDS",
    "AnalyzedDocument",
    "IndexDocument",
    "Postings",
    "Segment",
    "SegmentFormatError",
    "SegmentWriter",
    "analyze",
    "group_key",
]

FIELDS: Final = ("title", "text", "anchor")
"""The fields of every document, in this order in every per-field array."""
BLOCK_POSTINGS: Final = 128
_MAIN: Final = 1
"""The text field: the one whose frequency every posting stores."""
_SPARSE: Final = [0, 2]
"""Title and anchor: frequencies stored only where non-zero."""
MAGIC: Final = b"CSPSEG\x00"
VERSION: Final = 1

I64Array = npt.NDArray[np.int64]
U32Array = npt.NDArray[np.uint32]


class SegmentFormatError(IndexFormatError):
    """A segment file that cannot be read: truncated, damaged, or of another format version."""


class IndexDocument(msgspec.Struct, frozen=True):
    """What the index needs of a page: its URL, its title, its text, and the anchor text of the links
    pointing to it (IIR 21.1.1; joined with spaces), plus its prior (PageRank) and its group (its
    near-duplicate cluster, whose pages a search shows as one; "": a group of its own), all plain and
    picklable."""

    url: str
    title: str = ""
    text: str = ""
    anchor: str = ""
    prior: float = 0.0
    group: str = ""


class AnalyzedDocument(msgspec.Struct, frozen=True):
    """A document cut into terms, per field in `FIELDS` order: the map output of the build job."""

    url: str
    title: str
    fields: tuple[list[str], list[str], list[str]]
    prior: float = 0.0
    group: str = ""


def group_key(url: str, group: str) -> int:
    """The 64-bit key of a document's group: the same in every shard (a hash of the group's name, or
    of the URL for a document in a group of its own)."""
    return xxhash.xxh3_64_intdigest(("g:" + group if group else "u:" + url).encode("utf-8", "surrogatepass"))


def analyze(document: IndexDocument) -> AnalyzedDocument:
    """The terms of each field of `document`, by the index's one tokenizer."""
    return AnalyzedDocument(
        document.url,
        document.title,
        (tokenize(document.title), tokenize(document.text), tokenize(document.anchor)),
        document.prior,
        document.group,
    )


def _blob(strings: Sequence[str]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]:
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.uint64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


class SegmentWriter:
    """Collects documents and writes them as one segment.

    It keeps every term occurrence of its documents in memory (13 bytes each, in flat arrays), so
    the build job gives a writer as many documents as fit (a shard of the crawl, or a part of one,
    written as several segments); `write` sorts and compresses them with whole-array numpy steps.
    """

    def __init__(self) -> None:
        self._vocabulary: dict[str, int] = {}
        self._terms = array("I")
        self._docs = array("I")
        self._fields = array("B")
        self._positions = array("I")
        self._lengths = array("I")
        self._urls: list[str] = []
        self._titles: list[str] = []
        self._priors: list[float] = []
        self._groups: list[int] = []

    def __len__(self) -> int:
        return len(self._urls)

    def add(self, document: IndexDocument) -> int:
        """Adds a document; returns its local doc id."""
        return self.add_analyzed(analyze(document))

    def add_analyzed(self, document: AnalyzedDocument) -> int:
        """Adds a document already cut into terms (by `analyze`); returns its local doc id."""
        doc = len(self._urls)
        vocabulary = self._vocabulary
        setdefault = vocabulary.setdefault
        for field, terms in enumerate(document.fields):
            count = len(terms)
            self._lengths.append(count)
            if not count:
                continue
            self._terms.extend([setdefault(term, len(vocabulary)) for term in terms])
            self._docs.extend(array("I", [doc]) * count)
            self._fields.extend(array("B", [field]) * count)
            self._positions.extend(range(count))
        self._urls.append(document.url)
        self._titles.append(document.title)
        self._priors.append(document.prior)
        self._groups.append(group_key(document.url, document.group))
        return doc

    def add_inverted(
        self,
        vocabulary: Sequence[str],
        occurrences: tuple[I64Array, I64Array, I64Array, I64Array],
        lengths: npt.NDArray[np.integer[Any]],
        urls: Sequence[str],
        titles: Sequence[str],
        priors: Sequence[float],
        group_keys: Sequence[int],
    ) -> None:
        """Adds documents given by their term occurrences (what a merge reads out of a segment),
        without a Python step per occurrence: `occurrences` are (term, doc, field, position) arrays
        in (doc, field, position) order, term indexing `vocabulary`, doc 0..len(urls)-1 among the
        documents added here; `lengths` their field lengths, one row per document."""
        term, doc, field, position = occurrences
        translate = np.zeros(len(vocabulary), dtype=np.uint32)
        setdefault = self._vocabulary.setdefault
        for ordinal in np.unique(term).tolist():  # only the terms that occur: no term of document frequency 0
            translate[ordinal] = setdefault(vocabulary[ordinal], len(self._vocabulary))
        self._terms.frombytes(translate[term].tobytes())
        self._docs.frombytes((doc + len(self._urls)).astype(np.uint32).tobytes())
        self._fields.frombytes(field.astype(np.uint8).tobytes())
        self._positions.frombytes(position.astype(np.uint32).tobytes())
        self._lengths.frombytes(np.asarray(lengths, dtype=np.uint32).ravel().tobytes())
        self._urls.extend(urls)
        self._titles.extend(titles)
        self._priors.extend(float(p) for p in priors)
        self._groups.extend(int(g) for g in group_keys)

    def extend(self, documents: Iterable[IndexDocument]) -> None:
        for document in documents:
            self.add(document)

    def write(self, path: str | Path) -> Path:
        """Writes the segment to `path` atomically (aside, fsynced, renamed); returns the path."""
        path = Path(path)
        sections = self._sections()
        header: dict[str, Any] = {
            "tokenizer": TOKENIZER_VERSION,
            "fields": list(FIELDS),
            "block_postings": BLOCK_POSTINGS,
            "docs": len(self._urls),
            "terms": len(self._vocabulary),
            "postings": int(sections["term_df"].sum(dtype=np.int64)),
            "blocks": int(sections["block_last_doc"].size),
        }
        return write_container(path, MAGIC, VERSION, header, sections)

    def _sections(self) -> dict[str, npt.NDArray[Any]]:
        fields = len(FIELDS)
        ordered = sorted(self._vocabulary)
        rank = np.empty(len(ordered), dtype=np.uint32)
        rank[np.fromiter((self._vocabulary[t] for t in ordered), dtype=np.int64, count=len(ordered))] = np.arange(
            len(ordered), dtype=np.uint32
        )
        occurrences = len(self._terms)
        if occurrences >= 2**31:
            raise ValueError("more than 2**31 term occurrences in one segment: give the writer fewer documents")
        # the occurrences came in (doc, field, position) order: a stable sort by term keeps it within a term
        term = rank[np.frombuffer(self._terms, dtype=np.uint32)] if occurrences else np.zeros(0, np.uint32)
        order = np.argsort(term, kind="stable")
        term = term[order]
        doc = np.frombuffer(self._docs, dtype=np.uint32)[order] if occurrences else term
        field = np.frombuffer(self._fields, dtype=np.uint8)[order] if occurrences else np.zeros(0, np.uint8)
        position = np.frombuffer(self._positions, dtype=np.uint32)[order] if occurrences else term
        del order

        key = (term.astype(np.uint64) << np.uint64(32)) | doc
        starts_posting = np.ones(occurrences, dtype=bool)
        np.not_equal(key[1:], key[:-1], out=starts_posting[1:])
        del key
        posting_of = np.cumsum(starts_posting, dtype=np.int64) - 1
        postings = int(posting_of[-1]) + 1 if occurrences else 0
        posting_term = term[starts_posting].astype(np.int64)
        posting_doc = doc[starts_posting].astype(np.int64)
        freqs = np.bincount(posting_of * fields + field, minlength=postings * fields).reshape(postings, fields)

        starts_group = starts_posting.copy()
        starts_group[1:] |= field[1:] != field[:-1]
        position_gaps = position.copy()
        position_gaps[1:] -= np.where(starts_group[1:], np.uint32(0), position[:-1])
        del starts_group, starts_posting, doc, field, position

        df = np.bincount(posting_term, minlength=len(ordered)).astype(np.int64)
        term_start = np.zeros(len(ordered) + 1, dtype=np.int64)
        np.cumsum(df, out=term_start[1:])
        term_blocks = (df + BLOCK_POSTINGS - 1) // BLOCK_POSTINGS
        first_block = np.zeros(len(ordered) + 1, dtype=np.int64)
        np.cumsum(term_blocks, out=first_block[1:])
        blocks = int(first_block[-1])
        rank_in_term = np.arange(postings) - term_start[posting_term]
        block_of = first_block[posting_term] + rank_in_term // BLOCK_POSTINGS

        gaps = posting_doc.copy()
        gaps[1:] -= posting_doc[:-1]
        gaps[rank_in_term == 0] = posting_doc[rank_in_term == 0] + 1  # from -1 at a term's first posting

        block_last_doc = np.zeros(blocks, dtype=np.uint32)
        block_last_doc[block_of] = posting_doc  # the last write per block wins: postings are in doc order

        streams: dict[str, npt.NDArray[Any]] = {}

        def stream(name: str, values: npt.NDArray[Any], owner: I64Array) -> npt.NDArray[np.uint64]:
            """Encodes one stream of values into `streams`; returns where each block's codes end."""
            lengths = varint_lengths(values)
            streams[name] = encode_varints(values, lengths)
            return np.cumsum(np.bincount(owner, weights=lengths, minlength=blocks)).astype(np.uint64)

        # frequencies: per posting (text tf << 2 | has title << 1 | has anchor), then the title and
        # anchor frequencies of the postings that have them (most have neither): about 1 byte a posting
        main = (freqs[:, _MAIN] << 2) | ((freqs[:, _SPARSE] > 0) * np.array([2, 1])).sum(axis=1)
        sparse = freqs[:, _SPARSE]
        present = sparse > 0
        sparse_values = sparse[present]
        sparse_owner = np.repeat(block_of, present.sum(axis=1))
        urls, url_offsets = _blob(self._urls)
        titles, title_offsets = _blob(self._titles)
        host_names = [host_of(url) if "//" in url else "" for url in self._urls]
        hosts = sorted(set(host_names))
        host_index = {host: index for index, host in enumerate(hosts)}
        host_blob, host_offsets = _blob(hosts)
        term_bytes, term_offsets = encode_terms(ordered)
        return {
            "term_bytes": np.frombuffer(term_bytes, dtype=np.uint8),
            "term_block_offsets": term_offsets,
            "term_df": df.astype(np.uint32),
            "term_first_block": first_block.astype(np.uint64),
            "block_last_doc": block_last_doc,
            "block_doc_end": stream("doc_codes", gaps, block_of),
            "block_freq_end": stream("freq_codes", main, block_of),
            "block_sparse_freq_end": stream("sparse_freq_codes", sparse_values, sparse_owner),
            "block_position_end": stream("position_codes", position_gaps, block_of[posting_of]),
            "doc_codes": streams["doc_codes"],
            "freq_codes": streams["freq_codes"],
            "sparse_freq_codes": streams["sparse_freq_codes"],
            "position_codes": streams["position_codes"],
            "field_lengths": np.frombuffer(self._lengths, dtype=np.uint32).reshape(-1, fields)
            if len(self._lengths)
            else np.zeros((0, fields), dtype=np.uint32),
            "url_bytes": urls,
            "url_offsets": url_offsets,
            "title_bytes": titles,
            "title_offsets": title_offsets,
            "doc_host": np.array([host_index[h] for h in host_names], dtype=np.uint32),
            "host_bytes": host_blob,
            "host_offsets": host_offsets,
            "prior": np.array(self._priors, dtype=np.float32),
            "doc_group": np.array(self._groups, dtype=np.uint64),
        }


class Frequencies:
    """The frequency codes of a run of postings: any rows read out as frequencies per field, the
    sparse title and anchor values decoded only when a row asked for has one."""

    __slots__ = ("_before", "_codes", "_sparse", "main")

    def __init__(self, main: I64Array, codes: npt.NDArray[np.uint8]) -> None:
        self.main = main
        self._codes = codes
        self._sparse: I64Array | None = None
        self._before: I64Array | None = None

    def rows(self, rows: I64Array) -> npt.NDArray[np.int64]:
        """Shape (len(rows), len(FIELDS)): the frequencies of the given postings of the run."""
        main = self.main[rows]
        freqs = np.zeros((main.size, len(FIELDS)), dtype=np.int64)
        freqs[:, _MAIN] = main >> 2
        flags = main & 3
        if flags.any():
            if self._sparse is None or self._before is None:
                present = ((self.main >> 1) & 1) + (self.main & 1)
                self._sparse = decode_varints(self._codes, int(present.sum()), dtype=np.int64)
                self._before = np.cumsum(present) - present  # sparse values of the postings before each
            before = self._before[rows]
            title = flags >= 2
            anchor = (flags & 1).astype(bool)
            freqs[title, _SPARSE[0]] = self._sparse[before[title]]
            freqs[anchor, _SPARSE[1]] = self._sparse[before[anchor] + title[anchor]]
        return freqs


@dataclass(frozen=True, slots=True)
class Postings:
    """Decoded postings of some blocks of one term: doc ids ascending, and frequencies per field."""

    docs: I64Array
    freqs: npt.NDArray[np.int64]
    """Shape (len(docs), len(FIELDS))."""


# section name -> (dtype, expected element count as a function of the header's counts)
_SECTIONS: Final[SectionSpec] = {
    "term_bytes": ("|u1", None),
    "term_block_offsets": ("<u8", lambda h: (h["terms"] + BLOCK_TERMS - 1) // BLOCK_TERMS + 1),
    "term_df": ("<u4", lambda h: h["terms"]),
    "term_first_block": ("<u8", lambda h: h["terms"] + 1),
    "block_last_doc": ("<u4", lambda h: h["blocks"]),
    "block_doc_end": ("<u8", lambda h: h["blocks"]),
    "block_freq_end": ("<u8", lambda h: h["blocks"]),
    "block_sparse_freq_end": ("<u8", lambda h: h["blocks"]),
    "block_position_end": ("<u8", lambda h: h["blocks"]),
    "doc_codes": ("|u1", None),
    "freq_codes": ("|u1", None),
    "sparse_freq_codes": ("|u1", None),
    "position_codes": ("|u1", None),
    "field_lengths": ("<u4", lambda h: h["docs"] * len(FIELDS)),
    "url_bytes": ("|u1", None),
    "url_offsets": ("<u8", lambda h: h["docs"] + 1),
    "title_bytes": ("|u1", None),
    "title_offsets": ("<u8", lambda h: h["docs"] + 1),
    "doc_host": ("<u4", lambda h: h["docs"]),
    "host_bytes": ("|u1", None),
    "host_offsets": ("<u8", None),
    "prior": ("<f4", lambda h: h["docs"]),
    "doc_group": ("<u8", lambda h: h["docs"]),
}


class Segment:
    """A segment file, memory-mapped and checked; see the module docstring for the layout."""

    def __init__(self, path: str | Path, *, verify_checksums: bool = True) -> None:
        self.path = Path(path)
        self._container = open_container(
            self.path,
            magic=MAGIC,
            version=VERSION,
            kind="a crawlspace index segment",
            spec=_SECTIONS,
            error=SegmentFormatError,
            verify_checksums=verify_checksums,
        )
        try:
            self._open(self._container.header, self._container.sections)
        except SegmentFormatError:
            self.close()
            raise
        except (TermDictionaryError, CodecError, ValueError, KeyError, TypeError) as exc:
            self.close()
            raise self._error(f"damaged: {exc}") from exc

    def _error(self, message: str) -> SegmentFormatError:
        return SegmentFormatError(f"{self.path}: {message}")

    def _open(self, header: dict[str, Any], sections: dict[str, npt.NDArray[Any]]) -> None:
        if header.get("tokenizer") != TOKENIZER_VERSION:
            raise self._error(
                f"made with tokenizer version {header.get('tokenizer')}, this one is {TOKENIZER_VERSION}: rebuild it"
            )
        if header.get("fields") != list(FIELDS) or header.get("block_postings") != BLOCK_POSTINGS:
            raise self._error(f"fields {header.get('fields')} / block size {header.get('block_postings')} unknown")
        self.fingerprint = xxhash.xxh3_64_hexdigest(json.dumps(header, sort_keys=True).encode())
        """Names this segment's contents (its header lists every section's checksum)."""
        self.docs: int = int(header["docs"])
        self.term_count: int = int(header["terms"])
        self.posting_count: int = int(header["postings"])
        self.block_count: int = int(header["blocks"])
        self._check_structure(sections)
        self.terms = TermDictionary(sections["term_bytes"].data, sections["term_block_offsets"], self.term_count)
        self.term_df = sections["term_df"]
        self.term_first_block = sections["term_first_block"]
        self.block_last_doc = sections["block_last_doc"]
        self._doc_end = sections["block_doc_end"]
        self._freq_end = sections["block_freq_end"]
        self._sparse_freq_end = sections["block_sparse_freq_end"]
        self._position_end = sections["block_position_end"]
        self._doc_codes = sections["doc_codes"]
        self._freq_codes = sections["freq_codes"]
        self._sparse_freq_codes = sections["sparse_freq_codes"]
        self._position_codes = sections["position_codes"]
        self.field_lengths = sections["field_lengths"].reshape(self.docs, len(FIELDS))
        self._url_bytes = sections["url_bytes"]
        self._url_offsets = sections["url_offsets"]
        self._title_bytes = sections["title_bytes"]
        self._title_offsets = sections["title_offsets"]
        self.doc_host = sections["doc_host"]
        self._host_bytes = sections["host_bytes"]
        self._host_offsets = sections["host_offsets"]
        self.prior = sections["prior"]
        self.doc_group = sections["doc_group"]
        self.block_postings = self._block_counts()

    def _check_structure(self, s: dict[str, npt.NDArray[Any]]) -> None:
        first = s["term_first_block"].astype(np.int64)
        if first[0] != 0 or first[-1] != self.block_count or np.any(np.diff(first) < 0):
            raise self._error("the term -> block table is not a partition of the blocks")
        df = s["term_df"].astype(np.int64)
        if int(df.sum()) != self.posting_count or np.any(np.diff(first) != (df + BLOCK_POSTINGS - 1) // BLOCK_POSTINGS):
            raise self._error("document frequencies disagree with the block table")
        for ends, stream in (
            ("block_doc_end", "doc_codes"),
            ("block_freq_end", "freq_codes"),
            ("block_sparse_freq_end", "sparse_freq_codes"),
            ("block_position_end", "position_codes"),
        ):
            end = s[ends].astype(np.int64)
            if np.any(np.diff(end) < 0) or (end.size and end[-1] != s[stream].size) or (end.size and end[0] < 0):
                raise self._error(f"{ends} does not index {stream}")
        for offsets, blob, count in (
            ("url_offsets", "url_bytes", self.docs),
            ("title_offsets", "title_bytes", self.docs),
            ("host_offsets", "host_bytes", s["host_offsets"].size - 1),
        ):
            values = s[offsets].astype(np.int64)
            if values.size != count + 1 or values[0] != 0 or values[-1] != s[blob].size or np.any(np.diff(values) < 0):
                raise self._error(f"{offsets} does not index {blob}")
        if self.docs and s["doc_host"].max() >= s["host_offsets"].size - 1:
            raise self._error("a document's host is not in the host table")
        if self.block_count and int(s["block_last_doc"].max()) >= self.docs:
            raise self._error("a block ends past the last document")

    def close(self) -> None:
        """Drops this object's views of the map and closes it; arrays a caller still holds keep the
        map alive until they go (numpy views pin an mmap), so closing is always safe."""
        for name, value in list(vars(self).items()):
            if isinstance(value, np.ndarray | TermDictionary):
                delattr(self, name)
        self._container.close()

    def __enter__(self) -> Segment:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Segment({str(self.path)!r}, docs={self.docs}, terms={self.term_count}, postings={self.posting_count})"

    # --- terms and postings

    def term_blocks(self, term: str) -> tuple[int, int] | None:
        """The block range [first, end) of `term`'s postings, or None when no document has it."""
        ordinal = self.terms.ordinal(term)
        if ordinal is None:
            return None
        return int(self.term_first_block[ordinal]), int(self.term_first_block[ordinal + 1])

    def block_postings_count(self, block: int, end: int, df: int, first: int) -> int:
        """How many postings block `block` of a term (blocks [first, end), `df` postings) holds."""
        return BLOCK_POSTINGS if block < end - 1 else df - (end - 1 - first) * BLOCK_POSTINGS

    def decode(self, first: int, low: int, high: int, counts: I64Array) -> Postings:
        """The postings of blocks [low, high) of the term whose blocks start at `first`; `counts`
        are the postings per block."""
        total = int(counts.sum())
        return Postings(self.decode_docs(first, low, high, total), self.decode_freqs(low, high, total))

    def decode_docs(self, first: int, low: int, high: int, total: int) -> I64Array:
        """The doc ids of blocks [low, high) (`total` postings) of the term whose blocks start at `first`."""
        start = int(self._doc_end[low - 1]) if low else 0
        gaps = decode_varints(self._doc_codes[start : int(self._doc_end[high - 1])], total, dtype=np.int64)
        gaps[0] += -1 if low == first else int(self.block_last_doc[low - 1])
        return np.cumsum(gaps, out=gaps)

    def decode_freqs(self, low: int, high: int, total: int) -> npt.NDArray[np.int64]:
        """The frequencies per field of the postings of blocks [low, high) (`total` of them)."""
        return self.frequencies(low, high, total).rows(np.arange(total))

    def frequencies(self, low: int, high: int, total: int) -> Frequencies:
        """The frequency codes of the postings of blocks [low, high), to read rows of (`Frequencies`)."""
        start = int(self._freq_end[low - 1]) if low else 0
        main = decode_varints(self._freq_codes[start : int(self._freq_end[high - 1])], total, dtype=np.int64)
        start = int(self._sparse_freq_end[low - 1]) if low else 0
        return Frequencies(main, self._sparse_freq_codes[start : int(self._sparse_freq_end[high - 1])])

    def positions(self, block: int, index: int, freqs: npt.NDArray[np.int64]) -> list[I64Array]:
        """Per field, the positions of the `index`-th posting of `block` (`freqs`: that block's frequencies)."""
        start = int(self._position_end[block - 1]) if block else 0
        end = int(self._position_end[block])
        gaps = decode_varints(self._position_codes[start:end], int(freqs.sum()), dtype=np.int64)
        before = int(freqs[:index].sum())
        out: list[I64Array] = []
        at = before
        for field in range(len(FIELDS)):
            count = int(freqs[index, field])
            out.append(np.cumsum(gaps[at : at + count]))
            at += count
        return out

    def block_codes(self) -> tuple[npt.NDArray[Any], ...]:
        """The postings streams and the block table as stored (what `topk.top_k` decodes in place):
        doc codes and their block ends, frequency codes and theirs, the sparse title/anchor codes
        and theirs, and each block's last doc id."""
        return (
            self._doc_codes,
            self._doc_end,
            self._freq_codes,
            self._freq_end,
            self._sparse_freq_codes,
            self._sparse_freq_end,
            self.block_last_doc,
        )

    def position_codes(self) -> tuple[npt.NDArray[np.uint8], npt.NDArray[Any]]:
        """Every block's position codes as stored, and where each block's end (what
        `phrases.phrase_matches` decodes in place)."""
        return self._position_codes, self._position_end

    def position_stream(self) -> npt.NDArray[np.uint8]:
        """Every block's position codes, in block order (a merge decodes them all at once)."""
        return self._position_codes

    def all_postings(self, low: int, high: int) -> tuple[I64Array, npt.NDArray[np.int64], I64Array]:
        """Blocks [low, high) across terms decoded at once: (docs, freqs, block of each posting).
        What a pass over the whole segment (bounds, statistics) uses, a chunk of blocks at a time."""
        counts = self.block_postings[low:high]
        total = int(counts.sum())
        doc_start = int(self._doc_end[low - 1]) if low else 0
        gaps = decode_varints(self._doc_codes[doc_start : int(self._doc_end[high - 1])], total, dtype=np.int64)
        block_of = np.repeat(np.arange(low, high), counts)
        starts = self._block_is_first()[low:high]
        base = np.where(starts, -1, self.block_last_doc[np.maximum(np.arange(low, high) - 1, 0)].astype(np.int64))
        running = np.cumsum(gaps)
        offsets = np.zeros(high - low, dtype=np.int64)
        offsets[1:] = np.cumsum(counts)[:-1]
        before = np.where(offsets > 0, running[np.maximum(offsets - 1, 0)], 0)
        docs = running - before[block_of - low] + base[block_of - low]
        return docs, self.decode_freqs(low, high, total), block_of

    def _block_counts(self) -> I64Array:
        """The number of postings of every block (128 but in a term's last block)."""
        df = self.term_df.astype(np.int64)
        blocks = np.diff(self.term_first_block.astype(np.int64))
        counts = np.full(self.block_count, BLOCK_POSTINGS, dtype=np.int64)
        last = self.term_first_block[1:].astype(np.int64)[blocks > 0] - 1
        counts[last] = df[blocks > 0] - (blocks[blocks > 0] - 1) * BLOCK_POSTINGS
        return counts

    def _block_is_first(self) -> npt.NDArray[np.bool_]:
        first = np.zeros(self.block_count, dtype=bool)
        starts = self.term_first_block[:-1].astype(np.int64)
        first[starts[np.diff(self.term_first_block.astype(np.int64)) > 0]] = True
        return first

    # --- the doc table

    def url(self, doc: int) -> str:
        return bytes(self._url_bytes[int(self._url_offsets[doc]) : int(self._url_offsets[doc + 1])]).decode(
            "utf-8", "surrogatepass"
        )

    def title(self, doc: int) -> str:
        return bytes(self._title_bytes[int(self._title_offsets[doc]) : int(self._title_offsets[doc + 1])]).decode(
            "utf-8", "surrogatepass"
        )

    def hosts(self) -> list[str]:
        """The host table: `doc_host[doc]` indexes it."""
        offsets = self._host_offsets
        return [
            bytes(self._host_bytes[int(offsets[i]) : int(offsets[i + 1])]).decode("utf-8", "surrogatepass")
            for i in range(offsets.size - 1)
        ]

    def size_bytes(self) -> dict[str, int]:
        """Bytes on disk by part: postings (doc gaps, frequencies, positions), dictionary, the rest."""
        return {
            "doc_gaps": int(self._doc_codes.size),
            "frequencies": int(self._freq_codes.size + self._sparse_freq_codes.size),
            "positions": int(self._position_codes.size),
            "file": self.path.stat().st_size,
        }
