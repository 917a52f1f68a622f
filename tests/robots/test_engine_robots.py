"""The engine's robots.txt handling, judged from the server's side: status semantics, redirects, retries,
the check right before each fetch, and sitemaps."""

from __future__ import annotations

import gzip
from pathlib import Path

from aiohttp import web

from tests.robots.crawl_helpers import HOST, ScriptedSite, crawl, keep_busy, page, raw, redirect, sequence

ROBOTS = "/robots.txt"
HOME = '<a href="/a.html">a</a> <a href="/private/p.html">p</a>'


def site_with_robots(robots: dict[str, object] | None = None, **extra: object) -> ScriptedSite:
    routes = {"/": page(HOME), "/a.html": page("a"), "/private/p.html": page("p")}
    routes.update(robots or {})  # type: ignore[arg-type]
    routes.update(extra)  # type: ignore[arg-type]
    return ScriptedSite(routes)


def test_disallowed_urls_are_never_requested(tmp_path: Path) -> None:
    site = site_with_robots({ROBOTS: raw(b"User-agent: *\nDisallow: /private/\n")})
    stats, _ = crawl(site, ["/"], tmp_path)
    assert site.requests[0] == ROBOTS  # robots.txt before anything else
    assert site.fetched("/a.html") == 1 and site.fetched("/private/p.html") == 0
    assert stats["robots_excluded"] == 1 and stats["robots_fetches"] == 1


def test_4xx_robots_means_everything_is_allowed(tmp_path: Path) -> None:
    site = site_with_robots({ROBOTS: raw(b"User-agent: *\nDisallow: /\n", status=403)})
    stats, _ = crawl(site, ["/"], tmp_path)
    assert site.fetched("/private/p.html") == 1 and stats["robots_excluded"] == 0


def test_5xx_robots_disallows_everything_and_drops_the_urls_after_the_retries(tmp_path: Path) -> None:
    site = site_with_robots()
    busy = keep_busy(site, raw(b"oops", status=503), pages=30)
    stats, _ = crawl(site, ["/", "/a.html", busy], tmp_path, robots_max_retries=2, min_delay=0.05)
    own = [path for path, host in zip(site.requests, site.hosts, strict=True) if host == HOST]
    assert set(own) == {ROBOTS}  # never a page
    assert len(own) == 3  # first attempt and two retries, then the URLs are dropped
    assert stats["robots_unreachable"] == 2 and stats["robots_waiting"] == 0
    assert stats["termination"] == "frontier-empty"


def test_a_crawl_does_not_idle_for_an_unreachable_robots_txt(tmp_path: Path) -> None:
    site = site_with_robots({ROBOTS: raw(b"oops", status=503)})
    stats, _ = crawl(site, ["/", "/a.html"], tmp_path, robots_max_retries=5, robots_retry_delay=60.0)
    assert site.requests == [ROBOTS]
    assert stats["termination"] == "frontier-empty" and stats["robots_waiting"] == 2
    assert stats["robots_unreachable"] == 0  # kept, not dropped (for a resumed crawl)


def test_refused_or_unresolvable_hosts_are_not_waited_for(tmp_path: Path) -> None:
    site = site_with_robots()
    busy = keep_busy(site, raw(b""), pages=5)
    stats, _ = crawl(site, ["http://nowhere.test:{port}/", busy], tmp_path, robots_max_retries=5)
    # the host is resolved before its robots.txt: a name that does not exist fails the URL at once
    assert stats["errors"]["dns-error"] == 1
    assert stats["robots_waiting"] == 0


def test_urls_wait_for_a_robots_txt_that_comes_back(tmp_path: Path) -> None:
    robots = sequence(raw(b"", status=500), raw(b"", status=502), raw(b"User-agent: *\nDisallow: /private/\n"))
    site = site_with_robots()
    busy = keep_busy(site, robots, pages=30)
    stats, _ = crawl(site, ["/", busy], tmp_path, robots_max_retries=3, min_delay=0.05)
    own = [path for path, host in zip(site.requests, site.hosts, strict=True) if host == HOST]
    assert own[:3] == [ROBOTS] * 3
    assert site.fetched("/") == 1 and site.fetched("/a.html") == 1  # the seed was kept, not dropped
    assert site.fetched("/private/p.html") == 0 and stats["robots_unreachable"] == 0


def test_robots_redirects_are_followed_up_to_five_hops(tmp_path: Path) -> None:
    hops = {f"/r{i}": redirect(f"/r{i + 1}") for i in range(1, 5)}
    site = site_with_robots(
        {ROBOTS: redirect("/r1"), "/r5": raw(b"User-agent: *\nDisallow: /private/\n")},
        **hops,  # type: ignore[arg-type]
    )
    crawl(site, ["/"], tmp_path)
    assert site.requests[:6] == [ROBOTS, "/r1", "/r2", "/r3", "/r4", "/r5"]
    assert site.fetched("/private/p.html") == 0


def test_more_than_five_robots_redirects_mean_unavailable(tmp_path: Path) -> None:
    hops = {f"/r{i}": redirect(f"/r{i + 1}") for i in range(1, 7)}
    site = site_with_robots(
        {ROBOTS: redirect("/r1"), "/r7": raw(b"User-agent: *\nDisallow: /\n")},
        **hops,  # type: ignore[arg-type]
    )
    crawl(site, ["/"], tmp_path)
    assert site.fetched("/r5") == 1 and site.fetched("/r6") == 0  # six requests, then it gives up
    assert site.fetched("/private/p.html") == 1  # unavailable: no restrictions


def test_robots_is_checked_right_before_each_fetch(tmp_path: Path) -> None:
    """The rules change while URLs wait in the frontier: the fetch obeys the rules of its own time."""
    robots = sequence(raw(b"User-agent: *\nDisallow:\n"), raw(b"User-agent: *\nDisallow: /\n"))
    site = site_with_robots({ROBOTS: robots})
    stats, _ = crawl(site, ["/"], tmp_path, robots_ttl=0.2, min_delay=0.3, max_delay=1.0)
    assert site.fetched("/") == 1
    assert site.fetched(ROBOTS) == 3  # the TTL is shorter than the politeness delay: once per URL
    assert site.fetched("/a.html") == 0 and site.fetched("/private/p.html") == 0
    assert stats["robots_excluded"] == 2


def test_crawl_delay_is_obeyed(tmp_path: Path) -> None:
    site = site_with_robots({ROBOTS: raw(b"User-agent: crawlspace\nCrawl-delay: 0.4\n")})
    crawl(site, ["/"], tmp_path, max_delay=5.0)
    assert site.fetched("/a.html") == 1 and site.fetched("/private/p.html") == 1
    gaps = [later - earlier for earlier, later in zip(site.times, site.times[1:], strict=False)]
    assert len(gaps) == 3 and min(gaps) >= 0.4


def test_sitemaps_from_robots_txt_go_through_the_filters(tmp_path: Path) -> None:
    urlset = (
        b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc>{origin}/from-sitemap.html</loc></url>"
        b"<url><loc>{origin}/private/hidden.html</loc></url>"
        b"<url><loc>{origin}/photo.jpg</loc></url>"
        b"<url><loc>http://elsewhere.test/x.html</loc></url>"
        b"</urlset>"
    )
    index = b"<sitemapindex><sitemap><loc>/maps/part1.xml.gz</loc></sitemap></sitemapindex>"
    holder: dict[str, bytes] = {}

    async def part1(request: web.Request) -> web.StreamResponse:
        origin = f"http://{request.host}"
        holder["body"] = gzip.compress(urlset.replace(b"{origin}", origin.encode()))
        return web.Response(body=holder["body"], content_type="application/gzip")

    robots = b"User-agent: *\nDisallow: /private/\nSitemap: /maps/index.xml\nSitemap: /maps/missing.xml\n"
    site = site_with_robots(
        {ROBOTS: raw(robots), "/maps/index.xml": raw(index, "application/xml"), "/maps/part1.xml.gz": part1},
        **{"/from-sitemap.html": page("s")},  # type: ignore[arg-type]
    )
    stats, _ = crawl(site, ["/"], tmp_path, scope="host", sitemaps=True)
    assert site.fetched("/maps/index.xml") == 1 and site.fetched("/maps/part1.xml.gz") == 1
    assert site.fetched("/maps/missing.xml") == 1
    assert site.fetched("/from-sitemap.html") == 1
    assert site.fetched("/private/hidden.html") == 0 and site.fetched("/photo.jpg") == 0
    assert stats["sitemaps_fetched"] == 2 and stats["sitemap_urls"] == 4
    assert stats["filtered"]["extension"] == 1 and stats["filtered"]["out-of-scope"] >= 1
    assert stats["robots_excluded"] >= 1


def test_sitemap_files_per_host_are_limited(tmp_path: Path) -> None:
    robots = b"User-agent: *\n" + b"".join(b"Sitemap: /s%d.xml\n" % i for i in range(10))
    site = site_with_robots({ROBOTS: raw(robots)})
    stats, _ = crawl(site, ["/"], tmp_path, sitemaps=True, sitemap_max_files=3)
    assert sum(site.fetched(f"/s{i}.xml") for i in range(10)) == 3
    assert stats["filtered"]["sitemap-limit"] == 7


def test_sitemaps_are_off_by_default(tmp_path: Path) -> None:
    site = site_with_robots({ROBOTS: raw(b"Sitemap: /s.xml\n")})
    crawl(site, ["/"], tmp_path)
    assert site.fetched("/s.xml") == 0
