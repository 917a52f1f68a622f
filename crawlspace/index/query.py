"""What a query says, parsed once: scored terms, phrases, exclusions and sites.

    word               a term (cut by the index's tokenizer; a word it cuts into several terms,
                       like "e-mail", is a phrase of them)
    "some words"       a phrase: the terms at consecutive positions of one field
    -word  -"a phrase" the document must not contain it
    site:host          the document's host is host or a subdomain of it (several: any of them);
                       -site:host excludes them
    a OR b             (the word OR in capitals anywhere) disjunctive: a document needs one term

By default a query is conjunctive: a document must contain every term. In both modes phrases and
sites are required and exclusions apply; a phrase's terms are scored like the others. A term given
twice is scored once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from crawlspace.index.tokens import tokenize

__all__ = ["Query", "parse_query"]

_PART = re.compile(r'(-?)(?:"([^"]*)"?|(site:)(\S+)|(\S+))')


@dataclass(frozen=True, slots=True)
class Query:
    terms: tuple[str, ...]
    """Every term that is scored, in query order, each once."""
    phrases: tuple[tuple[str, ...], ...] = ()
    excluded: tuple[tuple[str, ...], ...] = ()
    """Terms (one-term tuples) and phrases a document must not contain."""
    sites: tuple[str, ...] = ()
    excluded_sites: tuple[str, ...] = ()
    conjunctive: bool = True

    @property
    def empty(self) -> bool:
        return not self.terms


def parse_query(text: str, *, conjunctive: bool = True) -> Query:
    terms: list[str] = []
    phrases: list[tuple[str, ...]] = []
    excluded: list[tuple[str, ...]] = []
    sites: list[str] = []
    excluded_sites: list[str] = []
    for match in _PART.finditer(text):
        negated, quoted, site, host, word = match.groups()
        if site:
            (excluded_sites if negated else sites).append(host.lower().strip("."))
            continue
        if word == "OR" and not negated:
            conjunctive = False
            continue
        words = tuple(tokenize(quoted if quoted is not None else word))
        if not words:
            continue
        if negated:
            excluded.append(words)
            continue
        if len(words) > 1:
            phrases.append(words)
        terms.extend(words)
    return Query(
        tuple(dict.fromkeys(terms)),
        tuple(dict.fromkeys(phrases)),
        tuple(dict.fromkeys(excluded)),
        tuple(sites),
        tuple(excluded_sites),
        conjunctive,
    )
