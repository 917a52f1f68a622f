"""Our parser on every robots.txt the simulated web serves agrees with its hand-written ground truth."""

from __future__ import annotations

import pytest

from crawlspace.robots import RobotsCache
from crawlspace.simweb import RobotsKind, SimWeb, SimWebConfig
from crawlspace.urls import normalize


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb.generate(SimWebConfig(hosts=120, seed=21, robots_crawl_delay=0.3))


@pytest.mark.parametrize("agent", ["crawlspace", "otherbot", "crawlspace/0.1 (+https://example.test)"])
def test_verdicts_and_delays_agree_with_the_ground_truth(web: SimWeb, agent: str) -> None:
    token = agent.split("/")[0]
    urls = list(web.all_urls())
    kinds = set()
    checked = 0
    for host in web.hosts:
        status, text = web.robots_txt(host)
        cache = RobotsCache()
        rules = cache.store_response(web.origin(host), status, text.encode(), now=0.0)
        kinds.add(web.robots_kind(host))
        assert rules.crawl_delay(agent) == web.crawl_delay(host, token)
        for url in (u for u in urls if u.startswith(web.origin(host) + "/")):
            assert rules.allowed(normalize(url), agent) is web.robots_allowed(url, token), (host, text, url)
            checked += 1
    assert kinds == set(RobotsKind)
    assert checked > 2000
