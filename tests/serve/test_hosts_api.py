"""The hosts page and /api/hosts sorted, filtered and paged on the server, and the host and Page views
bounded, over a synthetic finished crawl (a crawl table written directly: no crawl to wait for)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestClient

from crawlspace.serve.view import LINKS_SHOWN, RECENT_FETCHES
from crawlspace.store.crawltable import CrawlTable, FetchInfo
from crawlspace.store.pagestore import TABLE_DIR
from tests.serve.hostile import HOSTILE_HOST_NAMES, add_hostile_hosts
from tests.serve.test_app import with_client

HOSTS = [f"h{number:02d}.test" for number in range(12)]
BIG = "big.test"
BIG_URLS = LINKS_SHOWN + 50


def _fetch(status: int, at: float) -> FetchInfo:
    return FetchInfo(
        status=status, outcome="ok", fetched=at, fetches=1, changes=0, first_fetched=at, duration=0.1, length=100
    )


@pytest.fixture(scope="module")
def many_hosts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 hosts of 1 to 4 pages (h03, h07, h11 with a 404 each), `big.test` with BIG_URLS pages all
    linking to its home page, and a frontier report listing h05 and the hostile names, never fetched."""
    directory = tmp_path_factory.mktemp("many-hosts")
    table = CrawlTable(directory / TABLE_DIR, sync=False)
    for number, host in enumerate(HOSTS):
        for path in range(number % 4 + 1):
            status = 404 if path == 3 else 200
            table.put(f"http://{host}/p{path}", "fetch", _fetch(status, 1000.0 + number), timestamp=1000.0 + number)
    table.put(f"http://{BIG}/", "fetch", _fetch(200, 2000.0), timestamp=2000.0)
    for number in range(BIG_URLS):
        url = f"http://{BIG}/p{number}"
        table.put(url, "fetch", _fetch(200, 1000.0 + number), timestamp=1000.0 + number)
        table.put(f"http://{BIG}/", "anchor", f"home {number}", qualifier=url, timestamp=1000.0 + number)
    table.commit()
    table.close()
    row = {"host": "h05.test", "status": "active", "queued": 3, "in_flight": 1, "next_contact_in": 0.5,
           "delay": 2.0, "delay_cause": "crawl-delay", "crawl_delay": 2.0, "failures": 0}  # fmt: skip
    report = {"format": 1, "time": 3000.0, "hosts": 3, "listed": 1, "rows": [row], "back_queued": 3}
    (directory / "hosts.json").write_text(json.dumps(report))
    add_hostile_hosts(directory)
    (directory / "progress.jsonl").write_text(json.dumps({"time": 3000.0, "pages": 300}) + "\n")
    (directory / "stats.json").write_text(json.dumps({"finished_at": 3000.0, "pages_fetched": 300}))
    return directory


EVERY = len(HOSTS) + 1 + len(HOSTILE_HOST_NAMES)


def _get_all(directory: Path, *paths: str) -> list[tuple[int, Any]]:
    async def body(client: TestClient[Any, Any]) -> list[tuple[int, Any]]:
        answers = []
        for path in paths:
            response = await client.get(path)
            is_json = response.content_type == "application/json"
            answers.append((response.status, await response.json() if is_json else await response.text()))
        return answers

    return with_client(directory, body)


def test_the_api_sorts_every_host_by_the_column_asked(many_hosts: Path) -> None:
    (_, by_pages), (_, by_host), (_, by_errors), (_, by_queued) = _get_all(
        many_hosts, "/api/hosts?per=500", "/api/hosts?sort=host&order=desc&per=500",
        "/api/hosts?sort=errors&per=500", "/api/hosts?sort=queued&order=asc&per=500",
    )  # fmt: skip
    assert by_pages["total"] == by_pages["matching"] == EVERY and by_pages["sort"] == "pages"
    pages = [(-row["pages"], row["host"]) for row in by_pages["hosts"]]
    assert pages == sorted(pages) and by_pages["hosts"][0]["host"] == BIG  # most first, ties by name
    assert [row["host"] for row in by_host["hosts"]] == sorted((row["host"] for row in by_pages["hosts"]), reverse=True)
    assert [row["host"] for row in by_errors["hosts"][:3]] == ["h03.test", "h07.test", "h11.test"]
    queued = [row["host"] for row in by_queued["hosts"]]
    assert queued[:3] == ["h05.test", *HOSTILE_HOST_NAMES]  # the report's hosts, least first; then the rest
    assert queued[3:] == sorted(queued[3:])


def test_pages_follow_one_another_to_the_last(many_hosts: Path) -> None:
    per = 4
    last = math.ceil(EVERY / per)
    answers = _get_all(
        many_hosts, "/api/hosts?per=500", *(f"/api/hosts?per={per}&page={n}" for n in range(1, last + 2))
    )
    whole = [row["host"] for row in answers[0][1]["hosts"]]
    pages = [answer for _, answer in answers[1:]]
    assert all(status == 200 for status, _ in answers)
    assert [host for page in pages[:last] for host in (row["host"] for row in page["hosts"])] == whole
    assert [page["pages"] for page in pages] == [last] * (last + 1)
    assert len(pages[last - 1]["hosts"]) == EVERY - per * (last - 1)
    assert pages[last]["hosts"] == []  # past the end: empty, not an error
    assert pages[0]["previous"] is None and pages[0]["next"] == f"/api/hosts?page=2&per={per}"
    assert pages[1]["previous"] == f"/api/hosts?per={per}"
    assert pages[last - 1]["next"] is None
    ((_, followed),) = _get_all(many_hosts, pages[0]["next"])
    assert followed == pages[1]


def test_the_filter_matches_parts_of_host_names(many_hosts: Path) -> None:
    (_, h0), (_, upper), (_, none) = _get_all(
        many_hosts, "/api/hosts?q=h0&sort=host", "/api/hosts?q=H1&sort=host", "/api/hosts?q=nowhere"
    )
    assert [row["host"] for row in h0["hosts"]] == HOSTS[:10] and h0["matching"] == 10 and h0["total"] == EVERY
    assert [row["host"] for row in upper["hosts"]] == ["h10.test", "h11.test"] and upper["q"] == "h1"
    assert none["hosts"] == [] and none["matching"] == 0 and none["pages"] == 1


def test_bad_parameters_are_a_400_that_says_why(many_hosts: Path) -> None:
    answers = _get_all(
        many_hosts, "/api/hosts?sort=size", "/api/hosts?per=501", "/api/hosts?page=0",
        "/hosts?order=sideways", "/hosts?page=x&page=y",
    )  # fmt: skip
    assert [status for status, _ in answers] == [400] * 5
    assert answers[0][1]["error"].startswith("sort must be one of host, pages, ok")
    assert answers[1][1]["error"] == "per must be at most 500 (hosts on one page); got 501"
    assert answers[2][1]["error"] == "page must be a whole number from 1; got 0"
    assert answers[3][1] == "order must be asc or desc; got 'sideways'"
    assert answers[4][1] == "page is given 2 times: give it once"


def test_the_hosts_page_links_pages_and_orders_and_escapes_names_and_the_filter(many_hosts: Path) -> None:
    typed = "<script>window.__pwned='q'</script>"
    (_, first), (_, second), (_, filtered), (_, past) = _get_all(
        many_hosts, "/hosts?sort=host&per=5", "/hosts?sort=host&per=5&page=2", "/hosts?q=" + quote(typed, safe=""),
        "/hosts?per=5&page=9",
    )  # fmt: skip
    assert 'href="/hosts?sort=host&amp;page=3&amp;per=5">next' in second
    assert 'href="/hosts?sort=host&amp;per=5">‹ previous' in second
    assert 'data-column="host" data-sorted="asc"' in second  # the order shown, and its header reverses it:
    assert '<a href="/hosts?sort=host&amp;order=desc&amp;per=5">host</a>' in second
    assert '<a href="/hosts?sort=errors&amp;per=5">errors</a>' in second  # another column: most first
    assert f'page <span class="page-number">2</span> of {math.ceil(EVERY / 5)}: hosts 6–10 of {EVERY}' in second
    for html in (first, second, filtered):
        assert "<script>window" not in html and "<img src=x" not in html
    assert "&lt;script&gt;window.__pwned=&#39;host&#39;&lt;/script&gt;.test</a>" in first  # names sort first
    assert 'href="/hosts/%3Cscript%3Ewindow.__pwned%3D%27host%27%3C%2Fscript%3E.test"' in first
    assert "&#34;&gt;&lt;img src=x onerror=&#34;window.__pwned=&#39;host-attribute&#39;&#34;&gt;.test</a>" in first
    assert 'value="&lt;script&gt;window.__pwned=&#39;q&#39;&lt;/script&gt;"' in filtered
    assert "No host has “&lt;script&gt;" in filtered
    last = math.ceil(EVERY / 5)
    assert f'No hosts on page 9: the last page is <a href="/hosts?page={last}&amp;per=5">{last}</a>' in past


def test_a_host_of_many_urls_and_a_page_of_many_anchors_are_shown_in_part(many_hosts: Path) -> None:
    home = quote(f"http://{BIG}/", safe="")
    (_, host), (_, page), (_, host_html), (_, page_html) = _get_all(
        many_hosts, f"/api/hosts/{BIG}", f"/api/page?url={home}", f"/hosts/{BIG}", f"/page?url={home}"
    )
    assert host["pages"] == BIG_URLS + 1 and len(host["recent"]) == RECENT_FETCHES
    assert [row["fetched"] for row in host["recent"][:2]] == [2000.0, 1000.0 + BIG_URLS - 1]  # newest first
    assert f"The newest {RECENT_FETCHES} of the host's {BIG_URLS + 1} fetched URLs" in host_html
    assert page["anchors_total"] == BIG_URLS and len(page["anchors"]) == LINKS_SHOWN
    assert f"Anchors pointing here ({BIG_URLS}; the first {LINKS_SHOWN} by linking page)" in page_html
    assert page_html.count('<li>“<span class="anchor-text">home ') == LINKS_SHOWN
