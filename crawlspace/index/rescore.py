"""A document that is not in the index scored against a query as if it were: the index's global
statistics (N, df, average field lengths) and BM25F, the same arithmetic as a search (`scoring`).

Why: to ask how a page would rank had the index been built from another version of it (an earlier
one, kept in the crawl table) without building an index per version. The user-experience refresh
policy (crawlspace.refresh.experience) scores each stored version of a page shown for a logged
query, and places it among that query's current results: how far a change moved the page is how
much refreshing that page matters to the people who search.

What a search would do and this does too: a conjunctive query needs every term, a disjunctive one
any; phrases must stand at consecutive positions of one field; excluded terms and phrases rule the
document out. Sites are not checked: the document's URL is given, and the caller asks about pages
already shown for the query, whose versions share their host.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from crawlspace.index.query import Query
from crawlspace.index.scoring import BM25F
from crawlspace.index.segment import IndexDocument, analyze

__all__ = ["score_document"]


def score_document(scorer: BM25F, query: Query, document: IndexDocument) -> float | None:
    """`document`'s score for `query` under the index's statistics, or None when the query would not
    return it (a term missing from a conjunctive query, a phrase absent, an excluded one present)."""
    fields = analyze(document).fields
    counts = [Counter(terms) for terms in fields]
    for excluded in query.excluded:
        if any(_has_phrase(terms, excluded) for terms in fields):
            return None
    present = [term for term in query.terms if any(term in field for field in counts)]
    if not present or (query.conjunctive and len(present) < len(query.terms)):
        return None
    for phrase in query.phrases:
        if not any(_has_phrase(terms, phrase) for terms in fields):
            return None
    lengths = np.array([[len(terms) for terms in fields]], dtype=np.uint32)
    total = 0.0
    for term in present:
        freqs = np.array([[field[term] for field in counts]], dtype=np.int64)
        idf = scorer.idf(scorer.stats.document_frequency(term))
        total += float(scorer.scores(idf, freqs, lengths)[0])
    return total


def _has_phrase(terms: Sequence[str], phrase: Sequence[str]) -> bool:
    width = len(phrase)
    first = phrase[0]
    return any(
        terms[start] == first and list(terms[start : start + width]) == list(phrase)
        for start in range(len(terms) - width + 1)
    )
