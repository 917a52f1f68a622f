"""The hosts table's order, pages, filter and query parameters (serve/hosttable.py), on plain data."""

from __future__ import annotations

from typing import Any

import pytest

from crawlspace.serve.hosttable import COLUMNS, MAX_PER, HostFigures, HostQuery, HostQueryError, HostTable


def _figures(host: str, pages: int, errors: int = 0, last: float = 100.0) -> HostFigures:
    figures = HostFigures(host, pages=pages, ok=pages - errors, client_errors=errors, seconds=0.1 * pages)
    figures.last_fetched = last
    return figures


FIGURES = {
    figures.host: figures
    for figures in (
        _figures("b.test", 5, errors=1),
        _figures("a.test", 5),
        _figures("c.test", 9, errors=3),
        _figures("D.test", 1),  # a name as a report may spell it: the filter ignores case
        _figures("e.test", 2, errors=1),
    )
}
LIVE: dict[str, dict[str, Any]] = {
    "e.test": {"host": "e.test", "queued": 7, "delay": 2.0, "delay_cause": "crawl-delay"},
    "a.test": {"host": "a.test", "queued": 7, "delay": 0.5, "delay_cause": "min-delay"},
    "new.test": {"host": "new.test", "queued": 30, "delay": "soon", "delay_cause": 3, "crawl_delay": 4.0},
}  # new.test: queued, never fetched; its damaged fields count as no value


def _table(live: dict[str, dict[str, Any]] | None = None) -> HostTable:
    table = HostTable()
    table.update(FIGURES, {"c.test": 1.5, "a.test": None}, LIVE if live is None else live)
    return table


def _hosts(table: HostTable, **query: str) -> list[str]:
    """The hosts of the first page of MAX_PER, the query given as a request's parameters."""
    params = {name: [value] for name, value in query.items()} | {"per": [str(MAX_PER)]}
    return [row["host"] for row in table.page(HostQuery.parse(params)).rows]


def test_each_column_orders_every_host_with_ties_by_name_and_no_value_last() -> None:
    table = _table()
    assert _hosts(table) == ["c.test", "a.test", "b.test", "e.test", "D.test", "new.test"]  # pages, most first
    assert _hosts(table, order="asc") == ["new.test", "D.test", "e.test", "a.test", "b.test", "c.test"]
    assert _hosts(table, sort="errors")[:3] == ["c.test", "b.test", "e.test"]
    assert _hosts(table, sort="host") == ["D.test", "a.test", "b.test", "c.test", "e.test", "new.test"]
    assert _hosts(table, sort="host", order="desc") == ["new.test", "e.test", "c.test", "b.test", "a.test", "D.test"]
    # the frontier's columns: its hosts by value, ties by name; every other host after them, by name
    assert _hosts(table, sort="queued") == ["new.test", "a.test", "e.test", "D.test", "b.test", "c.test"]
    assert _hosts(table, sort="queued", order="asc") == ["a.test", "e.test", "new.test", "D.test", "b.test", "c.test"]
    assert _hosts(table, sort="delay", order="asc") == ["a.test", "e.test", "D.test", "b.test", "c.test", "new.test"]
    assert _hosts(table, sort="delay_cause") == ["e.test", "a.test", "D.test", "b.test", "c.test", "new.test"]
    # Crawl-delay: the robots.txt's of a fetched host, the report's of one never fetched
    assert _hosts(table, sort="crawl_delay")[:2] == ["new.test", "c.test"]
    assert _hosts(table, sort="crawl_delay", order="asc")[:2] == ["c.test", "new.test"]
    assert _hosts(table, sort="mean_seconds")[-1] == "new.test"  # no fetch: no mean, last either way
    assert _hosts(table, sort="mean_seconds", order="asc")[-1] == "new.test"
    for column in COLUMNS:
        assert sorted(_hosts(table, sort=column)) == sorted(_hosts(table)), column  # every host, once


def test_pages_cover_the_order_once_and_end_where_they_should() -> None:
    table = _table()
    whole = _hosts(table)
    pages = [table.page(HostQuery(page=number, per=4)) for number in (1, 2, 3)]
    assert [page.pages for page in pages] == [2, 2, 2] and [page.matching for page in pages] == [6, 6, 6]
    assert [row["host"] for page in pages[:2] for row in page.rows] == whole
    assert [page.first for page in pages] == [1, 5, 0]
    assert pages[2].rows == []  # past the last page: empty, and it says how many there are
    empty = HostTable()
    empty.update({}, {}, {})
    nothing = empty.page(HostQuery())
    assert (nothing.rows, nothing.pages, nothing.matching, nothing.total, nothing.first) == ([], 1, 0, 0, 0)
    row = table.page(HostQuery(sort="host", per=1, page=2)).rows[0]
    assert row["host"] == "a.test" and row["pages"] == 5 and row["live"]["delay_cause"] == "min-delay"
    assert table.page(HostQuery(sort="host", per=1, page=1)).rows[0]["live"] is None


def test_the_filter_keeps_the_order_and_ignores_case() -> None:
    table = _table()
    found = table.page(HostQuery.parse({"q": ["  .TEST "], "sort": ["host"]}))
    assert found.matching == 6 and found.total == 6
    assert _hosts(table, q="d.") == ["D.test"]
    assert _hosts(table, q="e.") == ["e.test"]
    assert _hosts(table, q="st", sort="queued") == _hosts(table, sort="queued")
    page = table.page(HostQuery(q="nothing-like-it"))
    assert (page.rows, page.matching, page.total, page.pages) == ([], 0, 6, 1)


def test_orders_are_computed_once_per_input_change() -> None:
    table = _table()
    _hosts(table, sort="pages")
    _hosts(table, sort="queued")
    _hosts(table, sort="pages", q="test")
    assert table.orderings == 2
    table.update(FIGURES, {"c.test": 1.5, "a.test": None}, dict(LIVE))  # the same report, read again
    _hosts(table, sort="pages")
    _hosts(table, sort="queued")
    assert table.orderings == 2
    moved = dict(LIVE)
    moved["e.test"] = {"host": "e.test", "queued": 99}
    table.update(FIGURES, {}, moved)  # a new report: only the frontier's columns are ordered again
    assert _hosts(table, sort="queued")[0] == "e.test"
    _hosts(table, sort="pages")
    assert table.orderings == 3
    table.update(dict(FIGURES), {}, moved)  # a new scan: everything
    _hosts(table, sort="pages")
    assert table.orderings == 4


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"sort": ["size"]}, "sort must be one of host, pages,"),
        ({"order": ["up"]}, "order must be asc or desc; got 'up'"),
        ({"page": ["0"]}, "page must be a whole number from 1; got 0"),
        ({"page": ["-2"]}, "page must be a whole number from 1; got '-2'"),
        ({"page": ["two"]}, "page must be a whole number from 1; got 'two'"),
        ({"page": ["1e3"]}, "page must be a whole number from 1"),
        ({"page": ["9" * 5000]}, "page must be a whole number from 1"),
        ({"per": [str(MAX_PER + 1)]}, f"per must be at most {MAX_PER}"),
        ({"per": ["0"]}, "per must be a whole number from 1"),
        ({"page": ["1", "2"]}, "page is given 2 times: give it once"),
        ({"q": ["x" * 301]}, "q (a part of a host name) has at most 300 characters; got 301"),
    ],
)
def test_bad_parameters_say_what_is_wrong(params: dict[str, list[str]], message: str) -> None:
    with pytest.raises(HostQueryError) as raised:
        HostQuery.parse(params)
    assert str(raised.value).startswith(message)


def test_parameters_and_their_defaults_go_both_ways() -> None:
    assert HostQuery.parse({}) == HostQuery(sort="pages", order="desc", page=1, per=100, q="")
    assert HostQuery.parse({"sort": ["host"], "token": ["t"]}).order == "asc"  # a name: A to Z first
    assert HostQuery.parse({"page": [""], "per": [""]}) == HostQuery()
    query = HostQuery(sort="delay_cause", order="desc", page=3, per=20, q="example")
    assert HostQuery.parse({name: [value] for name, value in query.params().items()}) == query
    assert HostQuery().params() == {} and HostQuery(sort="host").params() == {"sort": "host"}
    assert query.params(page=1, order="asc") == {"sort": "delay_cause", "q": "example", "per": "20"}
