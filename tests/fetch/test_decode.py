"""Bounded streaming decoders: correct output for every coding fed in any chunking, and caps that
stop bombs without materializing them."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlspace.fetch.decode import BoundedDecoder, DecodeError, DecodeLimitExceeded, decode_body

TEXT = b"<html><body>" + b"".join(b"<p>paragraph %d with some text</p>" % i for i in range(2000)) + b"</body></html>"


def encode(data: bytes, coding: str) -> bytes:
    if coding == "gzip":
        return gzip.compress(data)
    if coding == "deflate":
        return zlib.compress(data)
    if coding == "raw-deflate":
        compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
        return compressor.compress(data) + compressor.flush()
    if coding == "br":
        return bytes(brotli.compress(data))
    if coding == "zstd":
        return bytes(zstandard.ZstdCompressor().compress(data))
    raise ValueError(coding)


def feed_in_chunks(decoder: BoundedDecoder, data: bytes, size: int) -> bytes:
    for start in range(0, len(data), size):
        decoder.feed(data[start : start + size])
    return decoder.output()


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate", "br", "zstd"])
@pytest.mark.parametrize("chunk", [1, 7, 1024, 1 << 20])
def test_round_trip_in_any_chunking(coding: str, chunk: int) -> None:
    header = "deflate" if coding == "raw-deflate" else coding
    decoder = BoundedDecoder(header, max_output=10 << 20)
    assert feed_in_chunks(decoder, encode(TEXT, coding), chunk) == TEXT


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=5000), st.sampled_from(["gzip", "deflate", "br", "zstd"]), st.integers(1, 600))
def test_round_trip_property(data: bytes, coding: str, chunk: int) -> None:
    decoder = BoundedDecoder(coding, max_output=1 << 20)
    assert feed_in_chunks(decoder, encode(data, coding), chunk) == data


def test_concatenated_gzip_members_are_all_decoded() -> None:
    body = gzip.compress(b"first half ") + gzip.compress(b"second half")
    assert decode_body(body, "gzip", 1 << 20) == b"first half second half"


def test_stacked_codings_are_undone_last_first() -> None:
    body = bytes(brotli.compress(gzip.compress(TEXT)))
    assert decode_body(body, "gzip, br", 10 << 20) == TEXT


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
def test_size_cap_stops_a_bomb_fed_at_once(coding: str) -> None:
    bomb = encode(bytes(16 << 20), coding)  # 16 MiB of zeros
    decoder = BoundedDecoder(coding, max_output=1 << 20, max_ratio=1e9)
    with pytest.raises(DecodeLimitExceeded, match="exceeds 1048576 bytes"):
        decoder.feed(bomb)
    assert len(decoder.output()) == 1 << 20  # what fits is kept, nothing more was produced


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_ratio_cap_stops_a_bomb_under_the_size_cap(coding: str) -> None:
    bomb = encode(bytes(16 << 20), coding)
    decoder = BoundedDecoder(coding, max_output=1 << 30, max_ratio=100, ratio_floor=1 << 20)
    with pytest.raises(DecodeLimitExceeded, match="ratio"):
        feed_in_chunks(decoder, bomb, 4096)
    # bounded by ratio x input read so far (at least the floor), far below the 16 MiB
    assert decoder.output_size <= max(1 << 20, 100 * decoder.input_size)
    assert decoder.output_size < 8 << 20


def test_ratio_cap_spares_small_repetitive_pages() -> None:
    page = b"<td></td>" * 100_000  # 900 KB compressing about 500x, under the 1 MiB floor
    assert decode_body(gzip.compress(page), "gzip", 10 << 20, max_ratio=100) == page


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
def test_junk_in_a_coding_is_a_decode_error(coding: str) -> None:
    junk = bytes(range(256)) * 16
    decoder = BoundedDecoder(coding, max_output=1 << 20)
    with pytest.raises(DecodeError):
        decoder.feed(b"\x1f\x8b\x08\x00" + junk if coding == "gzip" else junk)
        decoder.finish()


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_a_stream_cut_short_is_reported_at_finish(coding: str) -> None:
    encoded = encode(TEXT, coding)
    decoder = BoundedDecoder(coding, max_output=1 << 20)
    decoder.feed(encoded[: len(encoded) // 2])
    with pytest.raises(DecodeError, match="before its end"):
        decoder.finish()
    assert TEXT.startswith(decoder.output()) and decoder.output()  # what arrived is decoded


def test_a_complete_stream_finishes_quietly() -> None:
    decoder = BoundedDecoder("gzip", max_output=1 << 20)
    decoder.feed(gzip.compress(TEXT))
    decoder.finish()
    assert decoder.output() == TEXT


def test_unknown_coding_is_refused_up_front() -> None:
    with pytest.raises(DecodeError, match="compress"):
        BoundedDecoder("compress", max_output=100)


def test_identity_passes_through() -> None:
    decoder = BoundedDecoder("identity", max_output=100)
    assert decoder.identity
    decoder.feed(b"abc")
    assert decoder.output() == b"abc"
