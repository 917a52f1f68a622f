"""The Elias-Fano list of offsets gives back every value, at a fraction of an int64 array's size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlspace.graph.eliasfano import EliasFano


@settings(deadline=None)  # the first example compiles the kernels
@given(st.lists(st.integers(0, 2**40), max_size=2000), st.integers(0, 3))
def test_every_value_comes_back(values: list[int], spread: int) -> None:
    array = np.sort(np.array(values, np.int64) >> (spread * 10))
    offsets = EliasFano.of(array)
    assert len(offsets) == len(array)
    assert np.array_equal(offsets.to_array(), array)
    for index in range(0, len(array), 97):
        assert offsets[index] == array[index]
    if len(array):
        assert offsets[-1] == array[-1]


def test_runs_of_equal_values_and_long_gaps() -> None:
    array = np.array([0] * 600 + [5] * 300 + [2**50] + [2**50 + 1] * 700, np.int64)
    assert np.array_equal(EliasFano.of(array).to_array(), array)


def test_it_is_small_and_refuses_what_it_cannot_hold() -> None:
    starts = np.cumsum(np.random.default_rng(5).integers(1, 60, 100_000))  # list lengths of ~30 bits
    offsets = EliasFano.of(starts)
    assert np.array_equal(offsets.to_array(), starts)
    assert offsets.nbytes * 8 / len(starts) < 8.5  # 2 + log2(30) bits per node and the samples, not 64
    with pytest.raises(IndexError):
        offsets[len(starts)]
    with pytest.raises(ValueError):
        EliasFano.of(np.array([3, 2], np.int64))
