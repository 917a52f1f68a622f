from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from crawlspace.index.tokens import tokenize


def test_compatibility_forms_and_case_fold_to_one_term() -> None:
    assert tokenize("ＡＢＣ ﬁne Straße STRASSE") == ["abc", "fine", "strasse", "strasse"]


def test_uax29_keeps_apostrophes_and_numbers_inside_words() -> None:
    assert tokenize("Can't stop: 3.14 and 1,000 e-mail example.com.") == [
        "can't",
        "stop",
        "3.14",
        "and",
        "1,000",
        "e",
        "mail",
        "example.com",
    ]


def test_punctuation_and_symbols_are_not_terms() -> None:
    assert tokenize(" -- !! ... ♥ 🙂 ") == []


def test_han_characters_are_single_terms_and_katakana_stays_together() -> None:
    assert tokenize("東京タワー") == ["東", "京", "タワー"]


def test_query_words_match_page_words_across_forms() -> None:
    page = tokenize("The Café in ＴＯＫＹＯ")
    query = tokenize("cafe\u0301 tokyo")  # decomposed é, half-width letters
    assert set(query) <= set(page)


@given(st.text())
def test_the_terms_of_a_text_tokenize_to_themselves(text: str) -> None:
    """What the query side relies on: a term typed back as a query word is that same term."""
    terms = tokenize(text)
    stable = [t for t in terms if unicodedata.normalize("NFKC", t).casefold() == t]
    for term in stable:
        assert tokenize(term) == [term]
