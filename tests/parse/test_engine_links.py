"""The engine's link pipeline, judged from the server's side: nofollow, noindex, canonical, refresh, filters."""

from __future__ import annotations

import json
from pathlib import Path

from aiohttp import web

from tests.robots.crawl_helpers import ScriptedSite, crawl, page


def test_nofollow_links_meta_robots_and_x_robots_tag(tmp_path: Path) -> None:
    site = ScriptedSite(
        {
            "/": page(
                '<a href="/followed.html">f</a> <a href="/skipped.html" rel="nofollow">s</a>'
                ' <a href="/meta.html">m</a> <a href="/header.html">h</a> <a href="/noindex.html">n</a>'
            ),
            "/followed.html": page("ok"),
            "/skipped.html": page("never"),
            "/meta.html": page('<meta name="robots" content="nofollow"><a href="/from-meta.html">x</a>'),
            "/header.html": page('<a href="/from-header.html">x</a>', headers={"X-Robots-Tag": "crawlspace: nofollow"}),
            "/noindex.html": page('<meta name="crawlspace" content="noindex"><a href="/after-noindex.html">x</a>'),
            "/after-noindex.html": page("indexed links are still followed"),
        }
    )
    stats, _ = crawl(site, ["/"], tmp_path)
    assert site.fetched("/followed.html") == 1 and site.fetched("/skipped.html") == 0
    assert site.fetched("/from-meta.html") == 0 and site.fetched("/from-header.html") == 0
    assert site.fetched("/after-noindex.html") == 1
    assert stats["nofollow_links"] == 3 and stats["noindex_pages"] == 1


def test_follow_nofollow_option(tmp_path: Path) -> None:
    site = ScriptedSite({"/": page('<a href="/s.html" rel="nofollow">s</a>'), "/s.html": page("s")})
    crawl(site, ["/"], tmp_path, follow_nofollow=True)
    assert site.fetched("/s.html") == 1


def test_canonical_and_meta_refresh_are_followed(tmp_path: Path) -> None:
    site = ScriptedSite(
        {
            "/": page(
                '<link rel="canonical" href="/canonical.html"><meta http-equiv="refresh" content="0; url=/next">'
            ),
            "/canonical.html": page('<link rel="canonical" href="/canonical.html">'),
            "/next": page("next"),
        }
    )
    stats, _ = crawl(site, ["/"], tmp_path)
    assert site.fetched("/canonical.html") == 1 and site.fetched("/next") == 1
    assert stats["canonical_elsewhere"] == 1  # the canonical page names itself: not counted


def test_every_rejection_is_counted_by_reason_in_stats_json(tmp_path: Path) -> None:
    links = [
        "/ok.html",
        "/image.png",
        "/deep" + "/x" * 25,
        "/a/b/a/b/a/b",
        "/q?" + "&".join(f"p{i}=1" for i in range(30)),
        "/" + "l" * 2100,
        "/excluded/page.html",
        "http://elsewhere.test/",
        "mailto:someone@example.com",
        "http://[broken",
    ]
    site = ScriptedSite({"/": page(" ".join(f'<a href="{href}">x</a>' for href in links)), "/ok.html": page("ok")})
    stats, _ = crawl(site, ["/"], tmp_path, scope="host", exclude=("/excluded/",))
    assert site.fetched("/ok.html") == 1 and len([r for r in site.requests if r != "/robots.txt"]) == 2
    written = json.loads((tmp_path / "stats.json").read_text())
    assert (
        written["filtered"]
        == stats["filtered"]
        == {
            "excluded": 1,
            "extension": 1,
            "out-of-scope": 1,
            "path-too-deep": 1,
            "repeated-segments": 1,
            "scheme": 1,
            "too-many-query-params": 1,
            "url-too-long": 1,
        }
    )
    assert stats["links_extracted"] == 9  # the broken href never became a link


def test_seed_redirects_widen_the_scope(tmp_path: Path) -> None:
    async def to_www(request: web.Request) -> web.StreamResponse:
        return web.Response(status=301, headers={"Location": f"http://www.site.test:{request.url.port}/home"})

    site = ScriptedSite({"/": to_www, "/home": page('<a href="/inside.html">i</a>'), "/inside.html": page("i")})
    stats, _ = crawl(
        site, ["/"], tmp_path, scope="host", resolve={"site.test": "127.0.0.1", "www.site.test": "127.0.0.1"}
    )
    www = "www.site.test"
    assert site.fetched("/home", www) == 1 and site.fetched("/inside.html", www) == 1
    assert stats["filtered"].get("out-of-scope", 0) == 0


def test_host_budget_and_host_depth_in_a_crawl(tmp_path: Path) -> None:
    chain = {f"/c{i}": page(f'<a href="/c{i + 1}">next</a>') for i in range(20)}
    site = ScriptedSite({"/": page('<a href="/c0">chain</a>'), **chain})
    stats, _ = crawl(site, ["/"], tmp_path, max_host_depth=5)
    assert [path for path in site.requests if path.startswith("/c")] == [f"/c{i}" for i in range(5)]
    assert stats["filtered"] == {"host-depth": 1}
    site = ScriptedSite({"/": page('<a href="/c0">chain</a>'), **chain})
    stats, _ = crawl(site, ["/"], tmp_path / "budget", host_page_budget=4)
    assert len([path for path in site.requests if path != "/robots.txt"]) == 4
    assert stats["filtered"] == {"host-budget": 1}
