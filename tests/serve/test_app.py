"""The dashboard's HTTP side through aiohttp's test client, over a finished crawl of the hostile site."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from crawlspace.jobs import run as run_jobs
from crawlspace.refresh.experience import UserExperienceWeights, impression
from crawlspace.refresh.querylog import QueryLogWriter, SearchLog
from crawlspace.serve.app import make_app
from crawlspace.serve.security import CSRF_HEADER, TOKEN_COOKIE, Guard
from crawlspace.serve.server import ServeError, open_search_log
from crawlspace.serve.view import CrawlView
from tests.serve.hostile import ANCHOR_PAYLOAD, ATTRIBUTE_PAYLOAD, TITLE_PAYLOAD

T = TypeVar("T")


def with_client(
    directory: Path, body: Callable[[TestClient[Any, Any]], Awaitable[T]], guard: Guard | None = None,
    search_log: SearchLog | None = None,
) -> T:  # fmt: skip
    async def main() -> T:
        app = make_app(CrawlView(directory), guard or Guard(token=None), search_log)
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            return await body(client)

    return asyncio.run(main())


def tree(directory: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path): (path.stat().st_size, path.stat().st_mtime_ns) for path in directory.rglob("*") if path.is_file()
    }


def test_the_overview_api_gives_the_crawl_s_figures(hostile_crawl: Path) -> None:
    stats = json.loads((hostile_crawl / "stats.json").read_text())

    async def body(client: TestClient[Any, Any]) -> dict[str, Any]:
        response = await client.get("/api/overview")
        assert response.status == 200
        return await response.json()  # type: ignore[no-any-return]

    overview = with_client(hostile_crawl, body)
    assert overview["state"] == "finished"
    assert overview["termination"] == stats["termination"]
    assert overview["pages"] == stats["pages_fetched"]
    assert overview["bytes"] == stats["bytes_downloaded"]
    outcomes = {row["outcome"]: row for row in overview["outcomes"]}
    assert outcomes["200 OK"]["count"] == stats["responses_by_status"]["200"]
    assert outcomes["200 OK"]["kind"] == "status"
    assert sum(row["share"] for row in overview["outcomes"] if row["share"] is not None) == pytest.approx(1.0)
    assert overview["content_types"]["text/html"] >= 4
    assert len(overview["series"]) >= 1 and overview["series"][-1][1] == stats["pages_fetched"]


def test_the_overview_sends_only_the_chart_s_new_points_when_asked(hostile_crawl: Path, tmp_path: Path) -> None:
    # The 20-page crawl can end inside one progress interval; a copy with later reports appended (as a
    # crawl that went on would write them) gives the chart several points whatever the machine's speed.
    crawl = tmp_path / "crawl"
    shutil.copytree(hostile_crawl, crawl)
    progress = crawl / "progress.jsonl"
    last = json.loads(progress.read_text().splitlines()[-1])
    with progress.open("a") as appended:
        for step in range(1, 6):
            appended.write(json.dumps(dict(last, time=last["time"] + step, pages=last["pages"] + step)) + "\n")

    async def body(client: TestClient[Any, Any]) -> tuple[list[Any], list[Any], list[Any], int]:
        whole = (await (await client.get("/api/overview")).json())["series"]
        middle = whole[len(whole) // 2][0]
        later = (await (await client.get(f"/api/overview?since={middle}")).json())["series"]
        none = (await (await client.get(f"/api/overview?since={whole[-1][0]}")).json())["series"]
        bad = (await client.get("/api/overview?since=yesterday")).status
        return whole, later, none, bad

    whole, later, none, bad = with_client(crawl, body)
    assert len(whole) >= 6 and later == [point for point in whole if point[0] > whole[len(whole) // 2][0]]
    assert none == [] and bad == 400


def _assert_escaped(html: str) -> None:
    for payload in (TITLE_PAYLOAD, ANCHOR_PAYLOAD, ATTRIBUTE_PAYLOAD, "<svg onload"):
        assert payload not in html, f"unescaped {payload!r}"
    assert "<script>window" not in html


def test_every_page_shows_the_payloads_as_text(hostile_crawl: Path) -> None:
    async def body(client: TestClient[Any, Any]) -> dict[str, str]:
        hosts = (await (await client.get("/api/hosts")).json())["hosts"]
        host = hosts[0]["host"]
        home = f"http://{host}/"
        pages = {}
        for path in (
            "/",
            "/hosts",
            f"/hosts/{quote(host, safe='')}",
            f"/page?url={quote(home, safe='')}",
            f"/page?url={quote(home + 'second', safe='')}",
            "/search?q=crawling",
        ):
            response = await client.get(path)
            assert response.status == 200, path
            assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
            pages[path] = await response.text()
        return pages

    pages = with_client(hostile_crawl, body)
    for html in pages.values():
        _assert_escaped(html)
    home = next(html for path, html in pages.items() if path.startswith("/page?") and not path.endswith("second"))
    assert "&lt;script&gt;window.__pwned = &#39;title&#39;&lt;/script&gt;Hostile title" in home
    assert "&lt;img src=x onerror=&#34;window.__pwned = &#39;anchor&#39;&#34;&gt;anchor text" in home
    host_page = next(html for path, html in pages.items() if path.startswith("/hosts/"))
    assert "Disallow: /private&lt;script&gt;" in host_page  # robots.txt as fetched, escaped
    assert "Disallow: <code>/private%3Cscript%3E" in host_page or "Disallow: <code>/private&lt;script" in host_page


def test_the_page_api_has_the_row_and_its_warc_record(hostile_crawl: Path) -> None:
    async def body(client: TestClient[Any, Any]) -> tuple[dict[str, Any], str, int]:
        hosts = (await (await client.get("/api/hosts")).json())["hosts"]
        url = f"http://{hosts[0]['host']}/second"
        row = await (await client.get(f"/api/page?url={quote(url, safe='')}")).json()
        record = await client.get(f"/record?url={quote(url, safe='')}")
        assert record.headers["Content-Type"].startswith("text/plain")
        missing = await client.get("/api/page?url=" + quote("http://nowhere.example/", safe=""))
        return row, await record.text(), missing.status

    row, record, missing = with_client(hostile_crawl, body)
    assert row["title"] == ATTRIBUTE_PAYLOAD
    assert row["fetch"]["status"] == 200 and len(row["history"]) == 1
    assert any(anchor["text"] == ANCHOR_PAYLOAD for anchor in row["anchors"])
    assert [link["text"] for link in row["outlinks"]] == [ANCHOR_PAYLOAD]
    assert record.startswith("WARC/1.1") and "warc-type: response" in record and "HTTP/1.1 200" in record
    assert missing == 404


def test_the_hosts_api_has_each_host_s_figures_and_crawl_delay(hostile_crawl: Path) -> None:
    async def body(client: TestClient[Any, Any]) -> list[dict[str, Any]]:
        return (await (await client.get("/api/hosts")).json())["hosts"]  # type: ignore[no-any-return]

    (host,) = with_client(hostile_crawl, body)
    assert host["host"].startswith("127.0.0.1:") and host["crawl_delay"] == 0.01
    assert host["pages"] == host["ok"] + host["redirects"] + host["errors"] >= 4


def test_metrics_agree_with_stats_json(hostile_crawl: Path) -> None:
    stats = json.loads((hostile_crawl / "stats.json").read_text())

    async def body(client: TestClient[Any, Any]) -> str:
        response = await client.get("/metrics")
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return await response.text()

    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(with_client(hostile_crawl, body))
        for sample in family.samples
    }
    assert samples[("crawlspace_pages_fetched_total", ())] == stats["pages_fetched"]
    assert samples[("crawlspace_bytes_downloaded_total", ())] == stats["bytes_downloaded"]
    assert samples[("crawlspace_robots_excluded_total", ())] == stats["robots_excluded"]
    for status, count in stats["responses_by_status"].items():
        assert samples[("crawlspace_responses_total", (("status", status),))] == count
    assert samples[("crawlspace_crawl_state", (("state", "finished"),))] == 1
    robots = stats["robots"]
    assert samples[("crawlspace_robots_cache_hits_total", ())] == robots["hits"] > 0
    assert samples[("crawlspace_robots_cache_misses_total", ())] == robots["misses"] > 0
    dns = stats["dns"]  # a literal 127.0.0.1: no lookup, so neither hits nor misses
    assert samples[("crawlspace_dns_cache_hits_total", ())] == dns["hits"] + dns["negative_hits"]
    assert samples[("crawlspace_dns_cache_misses_total", ())] == dns["lookups"]
    stored = samples[("crawlspace_fetch_duration_seconds_count", ())]
    assert stored == samples[("crawlspace_fetch_duration_seconds_bucket", (("le", "+Inf"),))] >= stats["pages_fetched"]


def test_a_token_guards_every_request(hostile_crawl: Path) -> None:
    token = "t" * 24

    async def body(client: TestClient[Any, Any]) -> None:
        assert (await client.get("/api/overview")).status == 401
        assert (await client.get("/")).status == 401
        assert (await client.get("/metrics")).status == 401
        assert (await client.get("/api/overview", headers={"Authorization": "Bearer wrong"})).status == 401
        assert (await client.get("/api/overview", headers={"Authorization": f"Bearer {token}"})).status == 200
        first = await client.get(f"/hosts?token={token}", allow_redirects=False)
        assert first.status == 303 and first.headers["Location"] == "/hosts"
        assert "HttpOnly" in first.headers["Set-Cookie"] and "SameSite=Strict" in first.headers["Set-Cookie"]
        assert (await client.get("/hosts", cookies={TOKEN_COOKIE: token})).status == 200
        assert (await client.get(f"/metrics?token={token}", allow_redirects=False)).status == 200  # no cookie jar

    with_client(hostile_crawl, body, Guard(token=token))


def test_controls_need_post_the_csrf_token_and_a_live_crawl(hostile_crawl: Path) -> None:
    guard = Guard(token=None)

    async def body(client: TestClient[Any, Any]) -> None:
        assert (await client.get("/api/control/pause")).status == 405
        assert (await client.post("/api/control/pause")).status == 403
        assert (await client.post("/api/control/pause", headers={CSRF_HEADER: "wrong"})).status == 403
        other = {CSRF_HEADER: guard.csrf_secret, "Origin": "http://evil.example"}
        assert (await client.post("/api/control/pause", headers=other)).status == 403
        finished = await client.post("/api/control/pause", headers={CSRF_HEADER: guard.csrf_secret})
        assert finished.status == 409 and "finished" in (await finished.json())["error"]
        unknown = await client.post("/api/control/explode", headers={CSRF_HEADER: guard.csrf_secret})
        assert unknown.status == 404
        page = await (await client.get("/")).text()
        assert re.search(r'<meta name="csrf-token" content="([^"]+)"', page)[1] == guard.csrf_secret  # type: ignore[index]

    with_client(hostile_crawl, body, guard)
    assert not (hostile_crawl / "control.json").exists()


def test_a_foreign_host_name_is_refused_on_loopback(hostile_crawl: Path) -> None:
    async def body(client: TestClient[Any, Any]) -> int:
        return (await client.get("/api/overview", headers={"Host": "attacker.example"})).status

    assert with_client(hostile_crawl, body) == 421


def test_search_says_how_to_build_the_index_then_finds_pages(hostile_crawl: Path, tmp_path: Path) -> None:
    async def search(client: TestClient[Any, Any]) -> tuple[dict[str, Any], str]:
        api = await (await client.get("/api/search?q=hostile")).json()
        return api, await (await client.get("/search?q=hostile")).text()

    before = tree(hostile_crawl)
    api, html = with_client(hostile_crawl, search)
    assert api["hits"] == [] and api["missing"] == f"crawlspace jobs {hostile_crawl} --only index"
    assert "has no search index yet" in html
    assert tree(hostile_crawl) == before  # serving and searching read only

    indexed = tmp_path / "indexed"
    shutil.copytree(hostile_crawl, indexed)
    run_jobs(indexed, only=["index"], scheduler="synchronous")
    before = tree(indexed)
    query_log = tmp_path / "queries.txt"  # a continuous crawl's refresh_query_log, outside its directory
    api, html = with_client(indexed, search, search_log=QueryLogWriter(query_log))
    assert [hit["title"] for hit in api["hits"]] == [TITLE_PAYLOAD]
    assert any(marked and text.lower() == "hostile" for text, marked in api["hits"][0]["snippet"])
    _assert_escaped(html)
    assert "<mark>" in html.lower() or "<mark>Hostile</mark>" in html

    async def broken_line(client: TestClient[Any, Any]) -> int:  # a query that would end the log's line
        return (await client.get("/api/search?q=" + quote("hostile\ninjected\u2028line", safe=""))).status

    assert with_client(indexed, broken_line, search_log=QueryLogWriter(query_log)) == 200
    # logging the searches writes outside the crawl directory only, and opening the table to show a hit's
    # snippet leaves it as it was (rocksdict's options file included: store/crawltable.py's _ReadOnlyView)
    assert tree(indexed) == before
    assert query_log.read_text(encoding="utf-8").splitlines() == ["hostile", "hostile", "hostile injected line"]
    # the user-experience refresh policy reads the searches: the page they showed weighs most
    weights = UserExperienceWeights(indexed / "jobs" / "index", query_log)
    found, stats = weights.compute()
    assert stats["queries"] == 2 and stats["query_log_lines"] == 3 and stats["malformed_lines"] == 0
    assert found == {api["hits"][0]["url"]: pytest.approx(2 * impression(1))}
    with pytest.raises(ServeError, match="inside the crawl directory"):
        open_search_log(indexed, indexed / "queries.txt")


def test_the_page_shows_in_links_and_duplicates_once_the_jobs_ran(hostile_crawl: Path, tmp_path: Path) -> None:
    async def home(client: TestClient[Any, Any]) -> tuple[dict[str, Any], str]:
        hosts = (await (await client.get("/api/hosts")).json())["hosts"]
        url = quote(f"http://{hosts[0]['host']}/", safe="")
        return await (await client.get(f"/api/page?url={url}")).json(), await (
            await client.get(f"/page?url={url}")
        ).text()

    row, html = with_client(hostile_crawl, home)
    assert row["inlinks"] is None and row["duplicates"] is None and "has not run on this crawl" in html
    done = tmp_path / "done"
    shutil.copytree(hostile_crawl, done)
    run_jobs(done, only=["dedup", "near", "graph"], scheduler="synchronous")
    row, html = with_client(done, home)
    sources = {link["source"].rsplit("/", 1)[1]: link["text"] for link in row["inlinks"]}
    assert sources["second"] == ANCHOR_PAYLOAD and sources["third"] == "home"
    assert row["duplicates"] == {"exact": [], "near": [], "exact_total": 0, "near_total": 0}
    _assert_escaped(html)


def test_serve_refuses_a_query_log_inside_the_directory_it_reads(hostile_crawl: Path) -> None:
    from click.testing import CliRunner

    from crawlspace.cli import main

    before = tree(hostile_crawl)
    result = CliRunner().invoke(
        main, ["serve", str(hostile_crawl), "--port", "0", "--query-log", str(hostile_crawl / "queries.txt")]
    )
    assert result.exit_code == 2 and "inside the crawl directory" in result.output, result.output
    assert tree(hostile_crawl) == before
