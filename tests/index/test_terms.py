from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlspace.index.terms import TermDictionary, TermDictionaryError, encode_terms


@given(st.sets(st.text(min_size=1, max_size=12), max_size=120), st.lists(st.text(max_size=12), max_size=20))
def test_every_term_finds_its_rank_and_others_find_none(terms: set[str], probes: list[str]) -> None:
    ordered = sorted(terms)
    data, offsets = encode_terms(ordered)
    dictionary = TermDictionary(data, offsets, len(ordered))
    assert list(dictionary) == ordered
    for rank, term in enumerate(ordered):
        assert dictionary.ordinal(term) == rank
    for probe in probes:
        assert dictionary.ordinal(probe) == (ordered.index(probe) if probe in terms else None)


def test_front_coding_shares_prefixes() -> None:
    terms = [f"international{i:03d}" for i in range(64)]
    data, _ = encode_terms(terms)
    assert len(data) < sum(len(t) for t in terms) / 3


def test_unsorted_terms_are_refused() -> None:
    with pytest.raises(ValueError, match="out of order"):
        encode_terms(["b", "a"])


def test_offsets_that_do_not_fit_the_bytes_are_an_error() -> None:
    data, offsets = encode_terms(["a", "b"])
    with pytest.raises(TermDictionaryError, match="block offsets"):
        TermDictionary(data[:-1], offsets, 2)
    with pytest.raises(TermDictionaryError, match="2 block offsets for 40 terms"):
        TermDictionary(data, offsets, 40)
    assert TermDictionary(b"", np.zeros(1, dtype=np.uint64), 0).ordinal("a") is None
