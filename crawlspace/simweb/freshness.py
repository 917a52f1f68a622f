"""How fresh a continuous crawl kept its copy of a changing web, judged from the server's log alone.

Cho & Garcia-Molina's measures (SIGMOD 2000): a copy of a page is fresh while the page has not changed
since the copy was fetched; its age is 0 while fresh, then the time since the first change the copy
missed. Over a window [start, end], the collection is the pages the crawl had fetched before `start`
(so that every policy is judged on the same pages, after its first pass), and

    freshness = mean over the collection of (time fresh in the window) / (end - start)
    age       = mean over the collection of (integral of the age over the window) / (end - start)

Every 200 or 304 answer to a GET refreshes the copy (a 304 says the copy is current, which it was
until then). The change times come from the web's own model (simweb.changes), so the figures are
exact, not sampled.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from crawlspace.simweb.generator import SimWeb, unescape_unreserved
from crawlspace.simweb.server import LogEntry


@dataclass(frozen=True)
class Freshness:
    freshness: float  # time-averaged fraction of the collection that is fresh
    age: float  # time-averaged mean age of the collection, seconds
    pages: int  # the collection's size
    fetches: int  # refetches of the collection's pages within the window

    def __str__(self) -> str:
        return f"freshness {self.freshness:.3f}, age {self.age:.1f} s over {self.pages} pages, {self.fetches} refetches"


def page_fetches(web: SimWeb, entries: Iterable[LogEntry]) -> dict[int, list[float]]:
    """The arrival times of the GETs answered 200 or 304, by the page whose content they got."""
    fetched: dict[int, list[float]] = defaultdict(list)
    for entry in entries:
        if entry.method != "GET" or entry.status not in (200, 304) or entry.path == "/robots.txt":
            continue
        host = entry.host.rsplit(":", 1)[0].lower() if ":" in entry.host else entry.host.lower()
        if not web.has_host(host):
            continue
        node = web.node_of(web.origin(host) + unescape_unreserved(entry.path))
        page = None if node is None else web.page_of(node)
        if page is not None and node == page:  # copies are other URLs with their own copy: left out
            fetched[page].append(entry.arrived)  # as logged: the time the server computed the version at
    return {page: sorted(times) for page, times in fetched.items()}


def crawl_freshness(web: SimWeb, entries: Iterable[LogEntry], *, start: float, end: float) -> Freshness:
    """Freshness and age of the crawl's copy over [start, end] (Unix times); see the module docstring."""
    changes = web.changes
    if changes is None:
        raise ValueError("freshness needs a changing web (SimWebConfig(changing=True))")
    if not end > start:
        raise ValueError(f"the window must end after it starts ({start} .. {end})")
    span = end - start
    fresh_total = age_total = 0.0
    pages = refetches = 0
    for page, times in page_fetches(web, entries).items():
        if times[0] >= start:
            continue  # not in the collection when the window opened
        pages += 1
        kept = [t for t in times if t < start][-1:] + [t for t in times if start <= t < end]
        refetches += len(kept) - 1
        for fetched, following in zip(kept, [*kept[1:], end], strict=True):
            changed = changes.next_change(page, fetched, horizon=following)
            stale_from = following if changed is None else max(changed, start)
            fresh_total += max(0.0, stale_from - max(fetched, start))
            if changed is not None:  # the age grows from the missed change until the next fetch
                low, high = max(changed, start), following
                if high > low:
                    age_total += ((high - changed) ** 2 - (low - changed) ** 2) / 2.0
    if not pages:
        return Freshness(0.0, 0.0, 0, 0)
    return Freshness(fresh_total / (pages * span), age_total / (pages * span), pages, refetches)


def freshness_curve(web: SimWeb, entries: Iterable[LogEntry], moments: Sequence[float]) -> list[float]:
    """The fraction of the crawl's copy that is fresh at each moment (Unix times, ascending): over the
    pages fetched by then, those that have not changed since their last fetch."""
    changes = web.changes
    if changes is None:
        raise ValueError("freshness needs a changing web (SimWebConfig(changing=True))")
    fetches = page_fetches(web, entries)
    curve: list[float] = []
    for moment in moments:
        fresh = held = 0
        for page, times in fetches.items():
            last = bisect.bisect_right(times, moment)
            if not last:
                continue
            held += 1
            fresh += changes.next_change(page, times[last - 1], horizon=moment) is None
        curve.append(fresh / held if held else 0.0)
    return curve
