from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlspace.index.codec import CodecError, decode_varints, encode_varints, varint_lengths


@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=200))
def test_values_come_back(values: list[int]) -> None:
    codes = encode_varints(np.array(values, dtype=np.uint64))
    assert decode_varints(codes, len(values)).tolist() == values
    assert codes.size == int(varint_lengths(np.array(values, dtype=np.uint64)).sum())


def test_the_codes_are_leb128() -> None:
    assert encode_varints([0, 1, 127, 128, 300]).tolist() == [0, 1, 127, 0x80, 1, 0xAC, 2]


def test_a_code_cut_short_is_an_error() -> None:
    with pytest.raises(CodecError, match="end inside a code"):
        decode_varints(np.array([0x80, 0x81], dtype=np.uint8))


def test_a_wrong_count_is_an_error() -> None:
    with pytest.raises(CodecError, match="3 codes where 2"):
        decode_varints(encode_varints([1, 2, 3]), 2)


def test_a_code_longer_than_64_bits_is_an_error() -> None:
    with pytest.raises(CodecError, match="longer than"):
        decode_varints(np.array([0xFF] * 11 + [1], dtype=np.uint8))
