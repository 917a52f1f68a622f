"""The Hosts table of a crawl of any size: sorted, filtered and cut into pages on the server.

A crawl of the size Heritrix's users run has 100,000 hosts and more; building, sending and sorting
every row in the browser at each look took seconds (bench/README.md, "serve"). Here a request costs a
slice of an order kept between requests: each column's order is computed the first time it is asked
for after the crawl's state changed (a new table scan, a new frontier report), a filter's matches the
first time that filter is asked for of that order, and only the rows of the page asked for become
dicts. Orders over the crawl table's figures survive a new frontier report (which lists a few hundred
hosts at most); only the frontier's columns are ordered again then.

Every order is total and the same from request to request, so that pages do not overlap or skip a
host: by the column's value, hosts without one (no fetch yet, not in the frontier's report) last in
either direction, ties by host name. Sans-IO: plain data in and out; `view.py` says when the inputs
changed, `app.py` turns a `HostQueryError` into a 400.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any

from crawlspace.store.crawltable import FetchInfo

DEFAULT_SORT = "pages"
DEFAULT_PER = 100
MAX_PER = 500
"""Rows on one page at the most: a page of 500 rows renders in a few ms; all of a crawl's took seconds."""
MAX_FILTER = 300
"""Characters of a host filter (a DNS name has at most 253, a port six more)."""
FILTERS_KEPT = 16
"""Filtered orders kept between requests (an operator paging through a few filters)."""

_PAGE_NUMBER = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    label: str
    numeric: bool = True
    live: bool = False
    """From the frontier's report (DIR/hosts.json), which lists only the hosts with most URLs queued."""

    @property
    def natural_order(self) -> str:
        """The order a click on its header asks first: most first for a figure, A to Z for a name."""
        return "desc" if self.numeric else "asc"


COLUMNS: dict[str, Column] = {
    column.name: column
    for column in (
        Column("host", "host", numeric=False),
        Column("pages", "pages"),
        Column("ok", "2xx"),
        Column("redirects", "3xx"),
        Column("errors", "errors"),
        Column("bytes", "bytes"),
        Column("mean_seconds", "mean fetch s"),
        Column("crawl_delay", "Crawl-delay s"),
        Column("last_fetched", "last fetch"),
        Column("queued", "queued", live=True),
        Column("in_flight", "in flight", live=True),
        Column("next_contact", "next contact", live=True),
        Column("delay", "delay s", live=True),
        Column("delay_cause", "delay cause", numeric=False, live=True),
        Column("failures", "consecutive errors", live=True),
    )
}


@dataclass(slots=True)
class HostFigures:
    """One host's fetches as the crawl table holds them (its newest fetch of each URL)."""

    host: str
    pages: int = 0
    ok: int = 0
    redirects: int = 0
    client_errors: int = 0
    server_errors: int = 0
    failures: int = 0
    """Attempts without a response (timeouts, DNS and connection errors)."""
    bytes: int = 0
    seconds: float = 0.0
    last_fetched: float = 0.0

    def add(self, fetch: FetchInfo) -> None:
        self.pages += 1
        status = fetch.status
        if 200 <= status < 300:
            self.ok += 1
        elif 300 <= status < 400:
            self.redirects += 1
        elif 400 <= status < 500:
            self.client_errors += 1
        elif status >= 500:
            self.server_errors += 1
        else:
            self.failures += 1
        self.bytes += fetch.length
        self.seconds += fetch.duration
        self.last_fetched = max(self.last_fetched, fetch.fetched)

    def to_dict(self) -> dict[str, Any]:
        """(By hand: `asdict` took four fifths of the hosts list's time on a crawl of 1,000 hosts.)"""
        return {
            "host": self.host, "pages": self.pages, "ok": self.ok, "redirects": self.redirects,
            "client_errors": self.client_errors, "server_errors": self.server_errors, "failures": self.failures,
            "bytes": self.bytes, "seconds": self.seconds, "last_fetched": self.last_fetched,
            "errors": self.client_errors + self.server_errors + self.failures,
            "mean_seconds": round(self.seconds / self.pages, 4) if self.pages else 0.0,
        }  # fmt: skip


class HostQueryError(ValueError):
    """A query parameter of the hosts page or API that cannot be understood (the message says which)."""


@dataclass(frozen=True, slots=True)
class HostQuery:
    """One page of the hosts table: `sort` (a `COLUMNS` name) in `order` ('asc' or 'desc'), hosts whose
    name contains `q` (case-insensitive), page `page` (from 1) of `per` rows."""

    sort: str = DEFAULT_SORT
    order: str = ""
    """'' for the column's natural order (`Column.natural_order`)."""
    page: int = 1
    per: int = DEFAULT_PER
    q: str = ""

    def __post_init__(self) -> None:
        if not self.order:
            object.__setattr__(self, "order", COLUMNS[self.sort].natural_order)

    @classmethod
    def parse(cls, params: Mapping[str, Sequence[str]]) -> HostQuery:
        """From a request's query parameters (each name with all its values); others are ignored (the
        token's, a cache-buster's). Raises HostQueryError with what is wrong and what is accepted."""

        def one(name: str) -> str | None:
            values = params.get(name) or []
            if len(values) > 1:
                raise HostQueryError(f"{name} is given {len(values)} times: give it once")
            return values[0] if values else None

        sort = one("sort") or DEFAULT_SORT
        if sort not in COLUMNS:
            raise HostQueryError(f"sort must be one of {', '.join(COLUMNS)}; got {sort[:40]!r}")
        order = one("order") or COLUMNS[sort].natural_order
        if order not in ("asc", "desc"):
            raise HostQueryError(f"order must be asc or desc; got {order[:40]!r}")
        page = _number(one("page"), "page", 1, 1)
        per = _number(one("per"), "per", MAX_PER, DEFAULT_PER)
        q = (one("q") or "").strip()
        if len(q) > MAX_FILTER:
            raise HostQueryError(f"q (a part of a host name) has at most {MAX_FILTER} characters; got {len(q)}")
        return cls(sort=sort, order=order, page=page, per=per, q=q.lower())

    def params(self, **changes: Any) -> dict[str, str]:
        """The query parameters that ask for this page with `changes` (defaults left out)."""
        query = replace(self, **changes)
        default = HostQuery(sort=query.sort, order=COLUMNS[query.sort].natural_order)
        found = {"sort": query.sort} if query.sort != DEFAULT_SORT else {}
        if query.order != default.order:
            found["order"] = query.order
        if query.q:
            found["q"] = query.q
        if query.page != 1:
            found["page"] = str(query.page)
        if query.per != DEFAULT_PER:
            found["per"] = str(query.per)
        return found


def _number(text: str | None, name: str, largest: int, default: int) -> int:
    if text is None or text == "":
        return default
    if not _PAGE_NUMBER.fullmatch(text):
        raise HostQueryError(f"{name} must be a whole number from 1; got {text[:40]!r}")
    value = int(text)
    if value < 1:
        raise HostQueryError(f"{name} must be a whole number from 1; got {value}")
    if name == "per" and value > largest:
        raise HostQueryError(f"per must be at most {largest} (hosts on one page); got {value}")
    return value


@dataclass(frozen=True, slots=True)
class HostPage:
    """One page of the table: its rows (as `CrawlView.hosts` documents them) and where it lies."""

    query: HostQuery
    rows: list[dict[str, Any]]
    matching: int
    """Hosts that match the filter (all of them without one)."""
    total: int
    """Hosts in the table."""

    @property
    def pages(self) -> int:
        """Pages of the matching hosts (1 when none match: an empty first page)."""
        return max(1, math.ceil(self.matching / self.query.per))

    @property
    def first(self) -> int:
        """The 1-based position of the page's first row among the matching hosts (0: no row)."""
        return (self.query.page - 1) * self.query.per + 1 if self.rows else 0

    def to_dict(self) -> dict[str, Any]:
        query = self.query
        return {
            "hosts": self.rows,
            "matching": self.matching,
            "total": self.total,
            "page": query.page,
            "pages": self.pages,
            "per": query.per,
            "sort": query.sort,
            "order": query.order,
            "q": query.q,
        }


Value = Callable[[HostFigures], Any]


class HostTable:
    """The hosts of a crawl, one table scan's figures and one frontier report's rows, with the orders
    asked for so far (module docstring). `update` gives it new inputs; `page` answers a query."""

    def __init__(self) -> None:
        self._figures: Mapping[str, HostFigures] = {}
        self._crawl_delays: Mapping[str, float | None] = {}
        self._live: Mapping[str, dict[str, Any]] = {}
        self._unfetched: dict[str, float | None] = {}
        """Hosts of the frontier's report without a fetch in the table, with their Crawl-delay."""
        self._records: dict[str, HostFigures] = {}
        self._by_name: list[HostFigures] = []
        self._orders: dict[tuple[str, bool], list[HostFigures]] = {}
        self._filtered: OrderedDict[tuple[str, bool, str], list[HostFigures]] = OrderedDict()
        self.orderings = 0
        """Orders computed so far (the tests' and the benchmark's view of the cache)."""

    def update(
        self,
        figures: Mapping[str, HostFigures],
        crawl_delays: Mapping[str, float | None],
        live: Mapping[str, dict[str, Any]],
    ) -> None:
        """New inputs, or the same ones again (cheap: compared, not copied): a new scan's `figures`
        (host -> figures; compared by identity) and Crawl-delays, the frontier's rows (`live`)."""
        unfetched = {name: row.get("crawl_delay") for name, row in live.items() if name not in figures}
        if figures is not self._figures or unfetched != self._unfetched:
            self._figures, self._crawl_delays, self._unfetched = figures, crawl_delays, unfetched
            self._records = dict(figures)
            for name in unfetched:
                self._records[name] = HostFigures(name)
            self._by_name = sorted(self._records.values(), key=attrgetter("host"))
            self._forget(lambda column: True)
        elif live != self._live:
            self._forget(lambda column: column.live)
        self._live = live

    def _forget(self, which: Callable[[Column], bool]) -> None:
        for key in [key for key in self._orders if which(COLUMNS[key[0]])]:
            del self._orders[key]
        for filtered in [key for key in self._filtered if which(COLUMNS[key[0]])]:
            del self._filtered[filtered]

    def __len__(self) -> int:
        return len(self._records)

    def _crawl_delay(self, host: HostFigures) -> float | None:
        name = host.host
        return self._unfetched[name] if name in self._unfetched else self._crawl_delays.get(name)

    def _value(self, column: Column) -> Value:
        """The sort key of a host in `column`; None: it has no value there (sorted last)."""
        name = column.name
        if column.live:
            live, wanted = self._live, str if not column.numeric else (int, float)

            def from_report(host: HostFigures) -> Any:
                value = (live.get(host.host) or {}).get(name)  # the report is a file: its types are checked
                return value if isinstance(value, wanted) and not isinstance(value, bool) else None

            return from_report
        if name == "errors":
            return lambda host: host.client_errors + host.server_errors + host.failures
        if name == "mean_seconds":
            return lambda host: host.seconds / host.pages if host.pages else None
        if name == "last_fetched":
            return lambda host: host.last_fetched or None
        if name == "crawl_delay":
            return self._crawl_delay
        return attrgetter(name)

    def order(self, sort: str, descending: bool) -> list[HostFigures]:
        """Every host in the order of `sort` (module docstring), computed once per input change."""
        key = (sort, descending)
        if key in self._orders:
            return self._orders[key]
        column = COLUMNS[sort]
        if sort == "host":
            order = self._by_name[::-1] if descending else self._by_name
        else:
            value = self._value(column)
            # a report's hosts are the only ones with a value in its columns: a few hundred, not all
            candidates = [self._records[name] for name in sorted(self._live)] if column.live else self._by_name
            valued = [host for host in candidates if value(host) is not None]
            valued.sort(key=value, reverse=descending)  # stable, also reversed: ties stay in name order
            if column.live:
                listed = {host.host for host in valued}
                order = valued + [host for host in self._by_name if host.host not in listed]
            else:
                order = valued + [host for host in self._by_name if value(host) is None]
        self.orderings += 1
        self._orders[key] = order
        return order

    def _matching(self, query: HostQuery) -> list[HostFigures]:
        descending = query.order == "desc"
        order = self.order(query.sort, descending)
        if not query.q:
            return order
        key = (query.sort, descending, query.q)
        if key in self._filtered:
            self._filtered.move_to_end(key)
            return self._filtered[key]
        needle = query.q
        matching = [host for host in order if needle in host.host.lower()]
        self._filtered[key] = matching
        if len(self._filtered) > FILTERS_KEPT:
            self._filtered.popitem(last=False)
        return matching

    def row(self, host: HostFigures) -> dict[str, Any]:
        return host.to_dict() | {"crawl_delay": self._crawl_delay(host), "live": self._live.get(host.host)}

    def page(self, query: HostQuery) -> HostPage:
        matching = self._matching(query)
        start = (query.page - 1) * query.per
        rows = [self.row(host) for host in matching[start : start + query.per]]
        return HostPage(query, rows, len(matching), len(self._records))
