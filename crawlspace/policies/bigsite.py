"""Big-site-first (seed 004 §3): URLs of the hosts with the most pending pages first.

A host's pending count is the number of its URLs discovered and not yet done (queued, waiting in a
back queue or in flight). A URL's level comes from its host's count on one log scale (one level
per doubling); when a host's count crosses into a more urgent level, every one of its URLs still
in the front queues is requeued there, so that the whole host moves up together. That is the only
re-prioritization: a host's level never falls while it is crawled (its URLs keep the level they
reached), so a big site, once started, is finished. Each crossing requeues the host's waiting
URLs once, and crossings happen at doublings, so the total is under two requeues per URL.

Memory beyond the per-URL record: a counter per host with pending URLs, and the set of each host's
URLs not yet handed on (so that they can be requeued together).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crawlspace.frontier import FrontierEntry
from crawlspace.policies.base import LogScale, Outlink, PageContent, Pending, ScoredPolicy
from crawlspace.urls import host_of


class BigSiteFirst(ScoredPolicy):
    name = "bigsite"

    def __init__(self, levels: int = 16) -> None:
        super().__init__(LogScale(levels, unit=1.0, step=2.0))
        self._counts: dict[str, int] = {}  # host -> URLs not done
        self._waiting: dict[str, set[str]] = {}  # host -> URLs in the front queues (not handed on)
        self._host_level: dict[str, int] = {}

    def _initial_score(self, entry: FrontierEntry) -> float:
        return float(self._counts.get(host_of(entry.url), 0) + 1)

    def _added(self, record: Pending) -> None:
        url = record.entry.url
        host = host_of(url)
        count = self._counts[host] = self._counts.get(host, 0) + 1
        self._waiting.setdefault(host, set()).add(url)
        level = record.level
        host_level = self._host_level.get(host, self.levels)
        if level >= host_level:
            record.level = host_level  # the host's level never falls while it has pending URLs
            return
        self._host_level[host] = level
        pending = self._pending
        for other_url in self._waiting[host]:
            other = pending[other_url]
            if other is not record:
                self._set_score(other, float(count))

    def _on_admit(self, record: Pending) -> None:
        url = record.entry.url
        host = host_of(url)
        waiting = self._waiting.get(host)
        if waiting is not None:
            waiting.discard(url)
            if not waiting and host not in self._counts:
                del self._waiting[host]

    def _observe(self, url: str, outlinks: Sequence[Outlink], content: PageContent | None) -> None:
        return None

    def _finish(self, url: str, record: Pending) -> None:
        super()._finish(url, record)  # out of the host's waiting set first
        host = host_of(url)
        left = self._counts.get(host, 0) - 1
        if left > 0:
            self._counts[host] = left
            return
        self._counts.pop(host, None)
        self._host_level.pop(host, None)
        if not self._waiting.get(host, True):
            del self._waiting[host]

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "hosts_pending": len(self._counts)}
