"""The one tokenizer of the search index: the same function cuts pages at index time and queries at
query time, so that a query word and the page word it should match always become the same term.

`tokenize(text)` returns the terms of a text in order; a term's position is its index in that list
(the n-th word of a field has position n), which is what phrase queries compare. The steps:

1. NFKC normalization (Unicode compatibility forms folded: full-width "ＡＢＣ" is "ABC", the ligature
   "ﬁ" is "fi", superscript digits are digits);
2. full Unicode case folding (`str.casefold`: "Straße" and "STRASSE" both become "strasse");
3. words by the Unicode word boundaries of UAX #29 (the `regex` package's WORD flag), keeping the
   segments that start with a letter, digit or connector: "can't", "3.14" and "example.com" are one
   word each (UAX #29 joins letters across an apostrophe or a full stop, digits across a comma or a
   full stop), "e-mail" is two, punctuation and spaces are none; a Han or Hiragana character is a
   word by itself (UAX #29 has no dictionary), so Chinese and Japanese are indexed as single characters.

No stemming and no stop words: BM25's idf already gives "the" almost no weight, and a phrase query
must find the words that are there. Changing any step changes which terms an index holds, so an index
records `TOKENIZER_VERSION` and a reader refuses an index made with another.
"""

from __future__ import annotations

import unicodedata

import regex

__all__ = ["TOKENIZER_VERSION", "term_spans", "tokenize"]

TOKENIZER_VERSION = 1
"""Bumped whenever `tokenize` would cut some text differently."""

_WORD = regex.compile(r"\b\w.*?\b", regex.WORD | regex.V1)
"""From a word boundary, a word character, then as little as possible up to the next boundary: with
the WORD flag `\\b` is a UAX #29 boundary, so each match is one whole segment that starts with `\\w`."""


def tokenize(text: str) -> list[str]:
    """The terms of `text` in order (position = index): NFKC, case folded, cut at UAX #29 word boundaries."""
    terms: list[str] = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    return terms


def term_spans(text: str) -> list[tuple[str, int, int]]:
    """(term, start, end) of each word of `text`, with offsets into `text` itself: for showing where a
    term is (snippets), not for indexing. Words are cut before normalizing, so for text that NFKC
    changes (a ligature, full-width forms) the terms can differ from `tokenize`'s in rare cases."""
    return [
        (unicodedata.normalize("NFKC", match.group()).casefold(), match.start(), match.end())
        for match in _WORD.finditer(text)
    ]
