"""robots.txt kinds: all present, verdicts by hand-written cases, and the served text agrees with them."""

from __future__ import annotations

import pytest
from protego import Protego

from crawlspace.simweb import RobotsKind, SimWeb
from crawlspace.simweb.robots import crawl_delay, path_allowed, product_token, robots_status

CASES = [
    # kind, path, agent, allowed
    (RobotsKind.NONE, "/s1/p3.html", "crawlspace", True),
    (RobotsKind.ALLOW_ALL, "/s4/d1/p2.html", "crawlspace", True),
    (RobotsKind.DISALLOW_SUBTREE, "/s1/p3.html", "crawlspace", False),
    (RobotsKind.DISALLOW_SUBTREE, "/s1/", "crawlspace", False),
    (RobotsKind.DISALLOW_SUBTREE, "/s1", "crawlspace", True),
    (RobotsKind.DISALLOW_SUBTREE, "/s2/p3.html", "crawlspace", True),
    (RobotsKind.WILDCARD, "/s1/d2/p5.html", "crawlspace", False),
    (RobotsKind.WILDCARD, "/~user/d2/p5.html", "crawlspace", False),
    (RobotsKind.WILDCARD, "/d2/p5.html", "crawlspace", True),  # "/*/d2/" needs a segment before d2
    (RobotsKind.WILDCARD, "/p13.html", "crawlspace", False),  # "/*3.html$"
    (RobotsKind.WILDCARD, "/p31.html", "crawlspace", True),
    (RobotsKind.WILDCARD, "/s1/d1/p7.html", "crawlspace", True),
    (RobotsKind.ALLOW_OVERRIDE, "/s2/p1.html", "crawlspace", False),
    (RobotsKind.ALLOW_OVERRIDE, "/s2/d1/p1.html", "crawlspace", True),  # longer Allow wins
    (RobotsKind.ALLOW_OVERRIDE, "/s2/d2/p1.html", "crawlspace", False),
    (RobotsKind.AGENT_GROUP, "/s3/p1.html", "crawlspace", False),
    (RobotsKind.AGENT_GROUP, "/s1/p1.html", "crawlspace", True),
    (RobotsKind.AGENT_GROUP, "/s3/p1.html", "otherbot", True),
    (RobotsKind.AGENT_GROUP, "/s1/p1.html", "otherbot", False),
    (RobotsKind.AGENT_GROUP, "/s3/p1.html", "crawlspace/0.1 (+https://example.test/bot)", False),
    (RobotsKind.AGENT_GROUP, "/s3/p1.html", "CrawlSpace", False),
    (RobotsKind.CRAWL_DELAY, "/s4/p1.html", "crawlspace", False),
    (RobotsKind.CRAWL_DELAY, "/s3/p1.html", "crawlspace", True),
    (RobotsKind.BLOCK_ALL, "/", "crawlspace", False),
    (RobotsKind.BLOCK_ALL, "/", "otherbot", False),
    (RobotsKind.AGENT_BLOCKED, "/", "crawlspace", False),
    (RobotsKind.AGENT_BLOCKED, "/s1/p1.html", "otherbot", True),
    (RobotsKind.SERVER_ERROR, "/", "crawlspace", False),
    (RobotsKind.SERVER_ERROR, "/", "otherbot", False),
    (RobotsKind.MESSY, "/s2/d3/p1.html", "crawlspace", False),
    (RobotsKind.MESSY, "/s1/d1/p1.html", "crawlspace", True),
    (RobotsKind.MESSY, "/s2/d3/p1.html", "otherbot", False),
    (RobotsKind.MESSY, "/s1/d1/p1.html", "somebot", False),
    (RobotsKind.MESSY, "/s2/d3/p1.html", "somebot", True),
]


@pytest.mark.parametrize(("kind", "path", "agent", "allowed"), CASES)
def test_hand_written_verdicts(kind: RobotsKind, path: str, agent: str, allowed: bool) -> None:
    assert path_allowed(kind, path, agent) is allowed


def test_product_token() -> None:
    assert product_token("crawlspace/0.1 (+https://example.test)") == "crawlspace"
    assert product_token("CrawlSpace") == "crawlspace"
    assert product_token("Mozilla/5.0 (compatible; otherbot)") == "mozilla"


def test_every_kind_is_present_and_most_hosts_are_open(web: SimWeb) -> None:
    kinds = [web.robots_kind(host) for host in web.hosts]
    assert set(kinds) == set(RobotsKind)
    open_hosts = sum(kind in (RobotsKind.NONE, RobotsKind.ALLOW_ALL) for kind in kinds)
    assert 0.3 <= open_hosts / len(kinds) <= 0.55


def test_status_codes_and_crawl_delay(web: SimWeb) -> None:
    for host in web.hosts:
        kind = web.robots_kind(host)
        status, text = web.robots_txt(host)
        assert status == robots_status(kind)
        if kind is RobotsKind.SERVER_ERROR:
            assert status == 503 and not web.robots_allowed(web.origin(host) + "/")
        if kind is RobotsKind.NONE:
            assert status == 404 and web.robots_allowed(web.origin(host) + "/s1/p1.html")
        if kind is RobotsKind.CRAWL_DELAY:
            assert "Crawl-delay: 0.2" in text and web.crawl_delay(host) == 0.2 and web.crawl_delay(host, "x") == 0.2
        if kind is RobotsKind.AGENT_GROUP:
            assert web.crawl_delay(host) == 0.2 and web.crawl_delay(host, "otherbot") is None
    assert crawl_delay(RobotsKind.NONE, 0.2) is None


@pytest.mark.parametrize("agent", ["crawlspace", "otherbot", "somebot"])
def test_served_robots_txt_agrees_with_the_ground_truth(web: SimWeb, agent: str) -> None:
    """A parser reading what the server sends reaches the verdicts the ground truth states by hand."""
    checked = 0
    urls = list(web.all_urls())
    for host in web.hosts:
        status, text = web.robots_txt(host)
        if status != 200:
            continue
        parser = Protego.parse(text)
        origin = web.origin(host)
        for url in (u for u in urls if u.startswith(origin + "/")):
            assert parser.can_fetch(url, agent) is web.robots_allowed(url, agent), (host, text, url)
            checked += 1
    assert checked > 1000


def test_seeds_are_crawlable_roots(web: SimWeb) -> None:
    seeds = web.seeds(10)
    assert len(seeds) == 10 and len(set(seeds)) == 10
    assert all(seed.endswith(".test/") and web.robots_allowed(seed) for seed in seeds)
    assert all(
        not web.robots_allowed(url)
        for url in web.all_urls()
        if web.robots_kind(url.split("/")[2]) is RobotsKind.BLOCK_ALL
    )
