"""Shingling and one-permutation MinHash: stable, tokenization-insensitive, and estimating Jaccard."""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlspace.seen.shingles import Shingler, band_keys, choose_bands, similarity

WORDS = [f"v{index}q" for index in range(5000)]


def document(rng: random.Random, words: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(words)]


def true_jaccard(shingler: Shingler, left: str, right: str) -> float:
    a, b = set(shingler.shingle_hashes(left).tolist()), set(shingler.shingle_hashes(right).tolist())
    return len(a & b) / len(a | b)


def test_words_fold_case_and_ignore_punctuation_and_spacing() -> None:
    shingler = Shingler()
    base = shingler.signature("The quick brown fox jumps over the lazy dog")
    assert base is not None
    variants = ("the QUICK brown, fox -- jumps over the lazy dog!", "  The\tquick\nbrown fox jumps over the lazy dog ")
    for variant in variants:
        other = shingler.signature(variant)
        assert other is not None and (other == base).all()
    different = shingler.signature("The quick brown cat jumps over the lazy dog")
    assert different is not None and not (different == base).all()


def test_word_hashes_are_those_of_the_words_not_their_positions() -> None:
    shingler = Shingler(shingle_words=1)
    hashes = shingler.word_hashes("alpha beta alpha gamma beta")
    assert hashes.size == 5
    assert hashes[0] == hashes[2] and hashes[1] == hashes[4] and len(set(hashes.tolist())) == 3
    assert shingler.word_hashes("ÉTÉ été").size == 2  # non-ASCII bytes are word characters


def test_signatures_are_stable_across_instances_and_long_documents() -> None:
    rng = random.Random(1)
    text = " ".join(document(rng, 60_000))  # beyond the precomputed power table
    first, second = Shingler().signature(text), Shingler().signature(text)
    assert first is not None and second is not None and (first == second).all()


TEXTS_ACROSS_BLOCKS = [
    "",
    " , ",
    "one",
    "one two three",  # fewer words than a shingle: one shingle of all of them
    "été ÉTÉ 😀x y z",
    "x\ud800y z w q",  # a lone surrogate, as lexbor can produce it
    "h" * 5000 + " tail words after a long one",
    " ".join(f"w{n}" for n in range(3000)),
]


@pytest.mark.parametrize("text", TEXTS_ACROSS_BLOCKS, ids=lambda text: repr(text[:20]))
def test_blocks_give_the_hashes_and_signature_of_the_whole_text(text: str) -> None:
    """Words cut by a block boundary, shingles across blocks and merged bin minima: the same at any
    block size as in one block (which is what the shingler computed before it took blocks)."""
    whole = Shingler(block_chars=len(text) + 1, compiled=False)
    expected = whole.signature(text)
    for block_chars in (1, 2, 7, 100):
        shingler = Shingler(block_chars=block_chars, compiled=False)
        assert (shingler.word_hashes(text) == whole.word_hashes(text)).all()
        assert (shingler.shingle_hashes(text) == whole.shingle_hashes(text)).all()
        signature = shingler.signature(text)
        assert (signature is None and expected is None) or (
            signature is not None and expected is not None and (signature == expected).all()
        )


def same(left: np.ndarray | None, right: np.ndarray | None) -> bool:
    return (left is None and right is None) or (
        left is not None and right is not None and left.dtype == right.dtype and left.tolist() == right.tolist()
    )


def test_the_installed_package_has_the_compiled_signature() -> None:
    """setup.py builds the extension optionally; here (a compiler at hand) it must have been built."""
    assert Shingler().compiled
    assert not Shingler(compiled=False).compiled


@pytest.mark.parametrize("text", TEXTS_ACROSS_BLOCKS, ids=lambda text: repr(text[:20]))
@pytest.mark.parametrize(("shingle_words", "num_perm"), [(1, 8), (2, 64), (4, 128), (5, 1024), (8, 4096)])
def test_compiled_signature_is_numpys(text: str, shingle_words: int, num_perm: int) -> None:
    compiled = Shingler(shingle_words=shingle_words, num_perm=num_perm)
    numpy_path = Shingler(shingle_words=shingle_words, num_perm=num_perm, compiled=False)
    assert same(compiled.signature(text), numpy_path.signature(text))


# words from few letters, so that shingles repeat; every kind of code point (1-, 2- and 4-byte strings, lone
# surrogates, astral characters, case and punctuation)
CHARACTERS = st.one_of(
    st.sampled_from("abAB01 ,.-\t\néÉ\x80\xff\u0100\u20ac\ud800\udfff\U0001f600"),
    st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None),
)


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(CHARACTERS, max_size=300),
    shingle_words=st.integers(1, 8),
    log_perm=st.integers(3, 12),
)
def test_compiled_signature_is_numpys_on_any_text(text: str, shingle_words: int, log_perm: int) -> None:
    compiled = Shingler(shingle_words=shingle_words, num_perm=1 << log_perm)
    numpy_path = Shingler(shingle_words=shingle_words, num_perm=1 << log_perm, compiled=False)
    assert same(compiled.signature(text), numpy_path.signature(text))


def test_compiled_signature_is_numpys_on_long_texts() -> None:
    """Many shingles a bin (the minimum kept, not the first or last) and words across numpy's blocks."""
    rng = random.Random(4)
    for words in (50, 5000, 40_000):
        text = " ".join(document(rng, words)) + " été\ud83d" + "x" * 70_000
        for shingle_words, num_perm in ((4, 128), (3, 16), (8, 2048)):
            assert same(
                Shingler(shingle_words=shingle_words, num_perm=num_perm).signature(text),
                Shingler(shingle_words=shingle_words, num_perm=num_perm, compiled=False).signature(text),
            )


def test_memory_of_a_signature_does_not_grow_with_the_text() -> None:
    """Taken at once, this 4 MiB text cost 215 MB of numpy arrays; in blocks, a few MB whatever its size
    (the compiled path reads the text in place: no memory at all)."""
    shingler = Shingler(compiled=False)
    rng = random.Random(3)
    text = " ".join(document(rng, 700_000))
    assert len(text) > 4 << 20
    tracemalloc.start()
    try:
        shingler.signature(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


@pytest.mark.parametrize("words", [12, 40, 200, 3000])
def test_similarity_estimates_jaccard(words: int) -> None:
    """Within 4 standard errors of the true Jaccard similarity, short documents (densified bins) included."""
    shingler = Shingler()
    rng = random.Random(words)
    errors = []
    for _ in range(30):
        base = document(rng, words)
        other = list(base)
        for position in rng.sample(range(words), rng.randint(0, words // 3)):
            other[position] = rng.choice(WORDS)
        left, right = " ".join(base), " ".join(other)
        sig_left, sig_right = shingler.signature(left), shingler.signature(right)
        assert sig_left is not None and sig_right is not None
        truth = true_jaccard(shingler, left, right)
        bound = 4 * max(np.sqrt(truth * (1 - truth) / shingler.num_perm), 0.02)
        errors.append(abs(similarity(sig_left, sig_right) - truth) <= bound + (0.1 if words < 50 else 0.0))
    assert sum(errors) >= 29


def test_lsh_bands_make_close_pairs_candidates() -> None:
    bands, rows = choose_bands(128, 0.9)
    assert bands * rows <= 128 and 1 - (1 - 0.9**rows) ** bands >= 0.999
    assert choose_bands(128, 0.5)[1] < rows  # a lower threshold needs shorter bands
    shingler = Shingler()
    rng = random.Random(2)
    base = document(rng, 800)
    near = list(base)
    for position in rng.sample(range(800), 5):
        near[position] = "changed"
    sig_a, sig_b = shingler.signature(" ".join(base)), shingler.signature(" ".join(near))
    sig_c = shingler.signature(" ".join(document(rng, 800)))
    assert sig_a is not None and sig_b is not None and sig_c is not None
    keys_a, keys_b, keys_c = band_keys(sig_a, rows), band_keys(sig_b, rows), band_keys(sig_c, rows)
    assert keys_a.size == bands
    assert (keys_a == keys_b).any()
    assert not (keys_a == keys_c).any()


def test_invalid_parameters() -> None:
    with pytest.raises(ValueError, match="power of two"):
        Shingler(num_perm=100)
    with pytest.raises(ValueError, match="shingle_words"):
        Shingler(shingle_words=0)
