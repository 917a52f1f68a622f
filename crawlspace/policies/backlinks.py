"""Backlink count (seed 004 §3.3; Cho, Garcia-Molina & Page 1998): URLs with the most in-links seen so far first.

An in-link is a fetched page linking the URL, counted once per page whatever the number of anchors
(a page endorses a target once) and never from the page to itself. Links to URLs already fetched
or handed on count nowhere: their order is decided. A pending URL whose count reaches a more
urgent level is requeued there (see base.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from crawlspace.policies.base import LogScale, Outlink, PageContent, ScoredPolicy, distinct_targets


class BacklinkCount(ScoredPolicy):
    """Level by in-links seen so far: 0 in-links the last level, then one level per doubling."""

    name = "backlinks"

    def __init__(self, levels: int = 16) -> None:
        super().__init__(LogScale(levels, unit=1.0, step=2.0))

    def _observe(self, url: str, outlinks: Sequence[Outlink], content: PageContent | None) -> None:
        pending = self._pending
        fresh = self._fresh
        for target in distinct_targets(url, outlinks):
            record = pending.get(target)
            if record is not None:
                self._set_score(record, record.score + 1.0)
            else:
                fresh[target] = fresh.get(target, 0.0) + 1.0  # new (or known: never asked for)
