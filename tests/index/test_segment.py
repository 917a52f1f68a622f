from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlspace.index.segment import (
    BLOCK_POSTINGS,
    FIELDS,
    IndexDocument,
    Segment,
    SegmentFormatError,
    SegmentWriter,
    analyze,
    group_key,
)
from tests.index.corpora import corpus

Reference = dict[str, dict[int, list[list[int]]]]


def reference(documents: list[IndexDocument]) -> Reference:
    """term -> doc -> per field the positions: the index as plain dicts."""
    index: Reference = {}
    for doc, document in enumerate(documents):
        for field, terms in enumerate(analyze(document).fields):
            for position, term in enumerate(terms):
                index.setdefault(term, {}).setdefault(doc, [[] for _ in FIELDS])[field].append(position)
    return index


def read_back(segment: Segment, term: str) -> dict[int, list[list[int]]]:
    blocks = segment.term_blocks(term)
    assert blocks is not None
    first, end = blocks
    ordinal = segment.terms.ordinal(term)
    assert ordinal is not None
    df = int(segment.term_df[ordinal])
    out: dict[int, list[list[int]]] = {}
    for block in range(first, end):
        counts = np.array([segment.block_postings_count(block, end, df, first)])
        postings = segment.decode(first, block, block + 1, counts)
        assert int(postings.docs[-1]) == int(segment.block_last_doc[block])
        for index, doc in enumerate(postings.docs.tolist()):
            positions = segment.positions(block, index, postings.freqs)
            assert [len(p) for p in positions] == postings.freqs[index].tolist()
            out[doc] = [p.tolist() for p in positions]
    # the same postings decoded as one range
    counts = np.array([segment.block_postings_count(b, end, df, first) for b in range(first, end)])
    assert segment.decode(first, first, end, counts).docs.tolist() == sorted(out)
    return out


def test_a_segment_reads_back_what_was_written(tmp_path: Path) -> None:
    documents = corpus(1, 700)
    writer = SegmentWriter()
    writer.extend(documents)
    with Segment(writer.write(tmp_path / "s.seg")) as segment:
        expected = reference(documents)
        assert segment.docs == 700 and segment.term_count == len(expected)
        assert list(segment.terms) == sorted(expected)
        assert max(int(df) for df in segment.term_df) > 3 * BLOCK_POSTINGS  # several blocks for common terms
        for term, postings in expected.items():
            assert read_back(segment, term) == postings
        assert segment.term_blocks("absent") is None
        for doc in (0, 350, 699):
            assert segment.url(doc) == documents[doc].url
            assert segment.title(doc) == documents[doc].title
            assert segment.hosts()[segment.doc_host[doc]] == documents[doc].url.split("/")[2]
            assert segment.prior[doc] == np.float32(documents[doc].prior)
            assert int(segment.doc_group[doc]) == group_key(documents[doc].url, "")
            assert segment.field_lengths[doc].tolist() == [len(f) for f in analyze(documents[doc]).fields]
        docs, freqs, _ = segment.all_postings(0, segment.block_count)
        assert docs.size == segment.posting_count and int(freqs.sum()) == int(segment.field_lengths.sum())


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(st.lists(st.tuples(st.text(max_size=30), st.text(max_size=80)), max_size=12))
def test_any_text_round_trips(tmp_path: Path, pages: list[tuple[str, str]]) -> None:
    documents = [IndexDocument(f"http://x.test/{i}", title, text) for i, (title, text) in enumerate(pages)]
    writer = SegmentWriter()
    writer.extend(documents)
    with Segment(writer.write(tmp_path / "any.seg")) as segment:
        expected = reference(documents)
        assert list(segment.terms) == sorted(expected)
        for term, postings in expected.items():
            assert read_back(segment, term) == postings


@pytest.fixture
def segment_file(tmp_path: Path) -> Path:
    writer = SegmentWriter()
    writer.extend(corpus(2, 200))
    return writer.write(tmp_path / "good.seg")


def test_a_truncated_file_names_what_is_missing(segment_file: Path) -> None:
    data = segment_file.read_bytes()
    for keep in (0, 10, 40, len(data) // 2, len(data) - 9):
        segment_file.write_bytes(data[:keep])
        with pytest.raises(SegmentFormatError, match=r"truncated|too short") as error:
            Segment(segment_file)
        assert str(segment_file) in str(error.value)


def test_a_flipped_byte_fails_its_checksum(segment_file: Path) -> None:
    data = bytearray(segment_file.read_bytes())
    data[-len(data) // 3] ^= 0x40
    segment_file.write_bytes(bytes(data))
    with pytest.raises(SegmentFormatError, match="checksum"):
        Segment(segment_file)


def test_another_file_or_version_is_refused(segment_file: Path) -> None:
    data = bytearray(segment_file.read_bytes())
    segment_file.write_bytes(b"GARBAGE!" + bytes(data[8:]))
    with pytest.raises(SegmentFormatError, match="bad magic"):
        Segment(segment_file)
    data[7] = 99
    segment_file.write_bytes(bytes(data))
    with pytest.raises(SegmentFormatError, match="version 99"):
        Segment(segment_file)
    data[7] = 1
    data[16] = ord("x")
    segment_file.write_bytes(bytes(data))
    with pytest.raises(SegmentFormatError, match="JSON"):
        Segment(segment_file)


def test_an_empty_segment_opens(tmp_path: Path) -> None:
    with Segment(SegmentWriter().write(tmp_path / "empty.seg")) as segment:
        assert segment.docs == 0 and segment.term_blocks("a") is None


def test_a_missing_file_is_a_format_error(tmp_path: Path) -> None:
    with pytest.raises(SegmentFormatError, match="cannot be read"):
        Segment(tmp_path / "nothing.seg")
