"""Ground truth: duplicates, near-duplicates, redirects, the trap, expected fetches and PageRank."""

from __future__ import annotations

import collections
from collections import deque

import pytest

from crawlspace.simweb import SimWeb
from tests.simweb.conftest import resolve


def test_exact_duplicates_share_bodies_and_use_absolute_links_only(web: SimWeb) -> None:
    clusters = web.duplicate_clusters()
    assert len(clusters) >= 0.02 * web.data.pages
    same_host = cross_host = 0
    for cluster_id, urls in clusters.items():
        assert len(urls) >= 2
        bodies = {web.body(url) for url in urls}
        assert len(bodies) == 1
        hosts = {url.split("/")[2] for url in urls}
        same_host += len(hosts) < len(urls)
        cross_host += len(hosts) > 1
        assert all(web.duplicate_cluster(url) == cluster_id for url in urls)
        assert all(link.href.startswith(("http://", "mailto:", "javascript:")) for link in web.links(urls[0]))
        assert all(_same_links(web, url, urls[0]) for url in urls)
    assert same_host and cross_host
    in_clusters = {url for urls in clusters.values() for url in urls}
    assert all(web.duplicate_cluster(url) is None for url in list(web.all_urls())[:200] if url not in in_clusters)


def _same_links(web: SimWeb, a: str, b: str) -> bool:
    return [(link.target, link.href) for link in web.links(a)] == [(link.target, link.href) for link in web.links(b)]


def test_near_duplicates_change_one_to_five_words(web: SimWeb) -> None:
    near = [(url, web.near_duplicate_of(url)) for url in web.all_urls()]
    near = [(url, original) for url, original in near if original is not None]
    assert len(near) >= 0.01 * web.data.pages
    changes: collections.Counter[int] = collections.Counter()
    for url, original in near:
        assert original is not None
        copy_words, original_words = web.body(url).split(), web.body(original).split()
        assert len(copy_words) == len(original_words)
        changed = sum(a != b for a, b in zip(copy_words, original_words, strict=True))
        assert 1 <= changed <= 5
        changes[changed] += 1
        assert web.duplicate_cluster(url) is None
        assert _same_links(web, url, original)
    assert set(changes) == {1, 2, 3, 4, 5}


def test_redirects_chains_and_loop(web: SimWeb) -> None:
    statuses = collections.Counter(web.all_urls().values())
    assert {200, 301, 302, 307, 308, 404, 500, 503} <= set(statuses)
    redirects = [url for url, status in web.all_urls().items() if 300 <= status < 400]
    for url in redirects:
        host = url.split("/")[2]
        response = web.response(web.host_index(host), "/" + url.split("/", 3)[3])
        assert response.location is not None
        assert resolve(url, response.location) == web.redirect_target(url)
    chains = [url for url in redirects if url.endswith("/1") and "/go/c" in url]
    assert chains
    for start in chains:
        url, hops = start, 0
        while web.redirect_target(url) is not None:
            url, hops = web.redirect_target(url), hops + 1  # type: ignore[assignment]
        assert hops == 3 and web.status(url) == 200
    loop = [url for url in redirects if url.endswith("/loop/a")]
    assert len(loop) == 1
    b = web.redirect_target(loop[0])
    assert b is not None and b.endswith("/loop/b") and web.redirect_target(b) == loop[0]


def test_trap_is_infinite_and_outside_the_ground_truth(web: SimWeb) -> None:
    trap = web.trap_host
    assert trap is not None
    root = web.origin(trap) + "/"
    entrance = [link.target for link in web.links(root) if link.target and web.is_trap(link.target)]
    assert entrance == [web.origin(trap) + "/cal/2026/11/"]
    url: str = web.origin(trap) + "/cal/2026/11/"
    seen: set[str] = set()
    for _ in range(30):  # walk forward through months: always a new page
        seen.add(url)
        assert web.status(url) == 200
        following = [link.target for link in web.links(url) if link.anchor_text == "Next month" and link.target]
        assert len(following) == 1
        url = following[0]
    assert len(seen) == 30 and url.endswith("/cal/2029/05/")
    assert not any(web.is_trap(u) for u in web.all_urls())
    assert not web.is_trap(root)
    assert not any(web.is_trap(u) for u in web.expected_fetches([root]))


def independent_bfs(web: SimWeb, seeds: list[str], follow_nofollow: bool = False) -> set[str]:
    """expected_fetches re-derived through the public, URL-level API only."""
    fetched: set[str] = set()
    queue = deque(seeds)
    seen = set(seeds)
    while queue:
        url = queue.popleft()
        if web.is_trap(url) or not web.robots_allowed(url):
            continue
        fetched.add(url)
        target = web.redirect_target(url)
        following = (
            [target]
            if target
            else [link.target for link in web.links(url) if link.target and (follow_nofollow or not link.nofollow)]
        )
        for next_url in following:
            if next_url not in seen:
                seen.add(next_url)
                queue.append(next_url)
    return fetched


def test_expected_fetches(web: SimWeb) -> None:
    seeds = web.seeds(5)
    expected = web.expected_fetches(seeds)
    assert expected == independent_bfs(web, seeds)
    urls = web.all_urls()
    assert set(seeds) <= expected <= set(urls)
    assert all(web.robots_allowed(url) for url in expected)
    # most of the crawlable web hangs together from a few seeds
    crawlable = [url for url, status in urls.items() if status == 200 and web.robots_allowed(url)]
    assert len(expected & set(crawlable)) >= 0.75 * len(crawlable)
    # every fetched, allowed redirect leads to a fetch of its target
    for url in expected:
        target = web.redirect_target(url)
        if target is not None and web.robots_allowed(target):
            assert target in expected
    statuses = collections.Counter(urls[url] for url in expected)
    assert statuses[404] and statuses[500] + statuses[503] and statuses[301]


def test_skipping_the_links_of_duplicates_changes_nothing(web: SimWeb) -> None:
    seeds = web.seeds(5)
    assert web.expected_fetches(seeds, follow_duplicate_links=False) == web.expected_fetches(seeds)


def test_nofollow_and_agent_change_the_expectation(web: SimWeb) -> None:
    seeds = web.seeds(5)
    default = web.expected_fetches(seeds)
    with_nofollow = web.expected_fetches(seeds, follow_nofollow=True)
    assert default < with_nofollow
    assert with_nofollow == independent_bfs(web, seeds, follow_nofollow=True)
    assert any("/private/" in url for url in with_nofollow - default)
    other = web.expected_fetches(seeds, agent="otherbot")
    assert other != default


def test_max_redirects_limits_chains(web: SimWeb) -> None:
    seeds = web.seeds(5)
    chain_starts = [url for url in web.expected_fetches(seeds) if "/go/c" in url and url.endswith("/1")]
    assert chain_starts
    limited = web.expected_fetches(seeds, max_redirects=1)
    for start in chain_starts:
        second = web.redirect_target(start)
        third = web.redirect_target(second)  # type: ignore[arg-type]
        assert second in limited and third not in limited


def test_pagerank(web: SimWeb) -> None:
    ranks = web.pagerank()
    assert set(ranks) == set(web.all_urls())
    assert sum(ranks.values()) == pytest.approx(1.0, abs=1e-9)
    assert min(ranks.values()) > 0
    top = sorted(ranks, key=ranks.__getitem__, reverse=True)[:10]
    assert web.origin(web.hosts[0]) + "/" in top
    assert sum(web.pagerank(damping=0.5).values()) == pytest.approx(1.0, abs=1e-9)
