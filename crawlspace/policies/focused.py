"""Best-first focused crawling (seed 004 §3.2, "optimal priority search"; Chakrabarti, van den Berg &
Dom 1999; Menczer et al.'s best-first): URLs most likely to lead to pages on a topic first.

The topic is a set of keywords or an example document. Relevance is the cosine between sublinear
tf vectors (1 + ln tf, English function words removed) of a text and of the topic; for keywords
each keyword weighs the same. A page's relevance is the better of its title's and its body's (a
long body dilutes the cosine, a title is the page's own summary). A link's score is

    anchor_weight x relevance(anchor text) + (1 - anchor_weight) x relevance(linking page)

and a URL keeps the best score of the links found to it so far; a pending URL whose score reaches
a more urgent level is requeued there (base.py). This is soft focus: nothing is pruned, the crawl
only reorders (policies never change what is fetched). A fetched page counts as relevant when its
relevance reaches `threshold`; the harvest rate (relevant pages / pages judged, Chakrabarti et al.)
is in the policy's stats.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from crawlspace.policies.base import LogScale, Outlink, PageContent, ScoredPolicy

_WORD = re.compile(r"[^\W_]{2,}")
_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def terms(text: str) -> list[str]:
    """Lower-cased words of two letters or more, English function words left out."""
    return [word for word in _WORD.findall(text.lower()) if word not in STOPWORDS]


class TopicScorer:
    """Cosine relevance of texts to a topic; the topic vector is built once."""

    __slots__ = ("_weights",)

    def __init__(self, weights: dict[str, float]) -> None:
        norm = math.sqrt(sum(weight * weight for weight in weights.values()))
        if not weights or norm == 0.0:
            raise ValueError("the topic has no terms (keywords or example text without content words)")
        self._weights = {term: weight / norm for term, weight in weights.items()}

    @classmethod
    def from_keywords(cls, keywords: Iterable[str]) -> TopicScorer:
        """Each content word of the keywords once, all weighing the same."""
        return cls(dict.fromkeys(terms(" ".join(keywords)), 1.0))

    @classmethod
    def from_document(cls, text: str, max_terms: int = 100) -> TopicScorer:
        """The example's `max_terms` most frequent content words, weighted 1 + ln tf."""
        counts = Counter(terms(text)).most_common(max_terms)
        return cls({term: 1.0 + math.log(count) for term, count in counts})

    @property
    def terms(self) -> list[str]:
        return sorted(self._weights)

    def score(self, text: str) -> float:
        """Cosine of `text` with the topic, in [0, 1]."""
        counts = Counter(terms(text))
        if not counts:
            return 0.0
        weights = self._weights
        dot = 0.0
        norm = 0.0
        for term, count in counts.items():
            weight = 1.0 + math.log(count)
            norm += weight * weight
            topic = weights.get(term)
            if topic is not None:
                dot += weight * topic
        return dot / math.sqrt(norm) if dot else 0.0

    def page_score(self, title: str, text: str) -> float:
        """A page's relevance: the better of its title's and its body's."""
        return max(self.score(title), self.score(text)) if title else self.score(text)


class FocusedCrawl(ScoredPolicy):
    """Best-first by topical relevance of anchors and linking pages."""

    name = "focused"

    def __init__(
        self, scorer: TopicScorer, levels: int = 16, *, anchor_weight: float = 0.5, threshold: float = 0.1
    ) -> None:
        if not 0.0 <= anchor_weight <= 1.0:
            raise ValueError(f"anchor_weight must be in [0, 1], got {anchor_weight}")
        # score 1 at level 0, one level per factor sqrt(2) below
        super().__init__(LogScale(levels, unit=math.sqrt(2.0) ** -(levels - 2), step=math.sqrt(2.0)))
        self.scorer = scorer
        self._anchor_weight = anchor_weight
        self.threshold = threshold
        self._judged = 0
        self._relevant = 0
        self._relevance_sum = 0.0

    def _observe(self, url: str, outlinks: Sequence[Outlink], content: PageContent | None) -> None:
        if content is None:
            page = 0.0
        else:
            page = self.scorer.page_score(content.title, content.text)
            self._judged += 1
            self._relevance_sum += page
            if page >= self.threshold:
                self._relevant += 1
        if not outlinks:
            return
        alpha = self._anchor_weight
        inherited = (1.0 - alpha) * page
        anchors: dict[str, float] = {}  # each target's best anchor on this page
        score_of = self.scorer.score
        for link in outlinks:
            if link.url == url:
                continue
            anchor_score = score_of(link.anchor) if link.anchor else 0.0
            if anchor_score > anchors.get(link.url, -1.0):
                anchors[link.url] = anchor_score
        pending = self._pending
        fresh = self._fresh
        for target, anchor_score in anchors.items():
            score = alpha * anchor_score + inherited
            record = pending.get(target)
            if record is None:
                if score > fresh.get(target, -1.0):
                    fresh[target] = score
            elif score > record.score:
                self._set_score(record, score)

    @property
    def harvest_rate(self) -> float:
        return self._relevant / self._judged if self._judged else 0.0

    def stats(self) -> dict[str, Any]:
        return {
            **super().stats(),
            "topic_terms": len(self.scorer.terms),
            "threshold": self.threshold,
            "pages_judged": self._judged,
            "relevant_pages": self._relevant,
            "harvest_rate": round(self.harvest_rate, 4),
            "mean_relevance": round(self._relevance_sum / self._judged, 4) if self._judged else 0.0,
        }
