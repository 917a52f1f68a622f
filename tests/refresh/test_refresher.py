"""The refresher without a crawl: a fake clock and the in-memory schedule. What each fetch does to a
page's history and next due time, the feed's pace, the guard against a second copy of a refresh."""

from __future__ import annotations

import math

import pytest

from crawlspace.crawl.ratelimit import RateLimit
from crawlspace.refresh.policies import Optimal, Proportional, Uniform
from crawlspace.refresh.refresher import Refresher
from crawlspace.refresh.schedule import MemorySchedule


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def refresher(policy: object = None, rate: float = 1.0) -> tuple[Refresher, Clock]:
    clock = Clock()
    made = Refresher(MemorySchedule(), policy or Optimal(), rate, min_interval=10.0, max_interval=10_000.0, clock=clock)  # type: ignore[arg-type]
    return made, clock


def test_each_fetch_adds_an_observation_and_the_validators_are_kept() -> None:
    made, clock = refresher()
    url = "http://a.test/"
    first = made.fetched(url, status=200, fingerprint=1, etag='"a"', last_modified=None, depth=2)
    assert 1_000_010.0 <= first <= 1_010_000.0 and made.schedule.due_time(url) == first
    assert made.validators(url) is not None and made.validators(url).etag == '"a"'  # type: ignore[union-attr]
    clock.now += 100
    made.fetched(url, status=304, fingerprint=None, etag=None, last_modified=None, depth=2)
    record = made.record(url)
    assert record is not None and record.fingerprint == 1 and record.etag == '"a"'  # a 304 keeps the copy's
    assert [o.changed for o in record.history.observations] == [False]
    clock.now += 100
    made.fetched(url, status=200, fingerprint=2, etag='"b"', last_modified=None, depth=2)
    record = made.record(url)
    assert record is not None and [o.changed for o in record.history.observations] == [False, True]
    assert made.stats.not_modified == 1 and made.stats.changed == 1 and made.stats.unchanged == 1
    assert record.depth == 2


def two_pages(policy: object, rate: float, slow_every: int) -> tuple[float, float, float]:
    """Two pages on two hosts, fetched 13 times 10 minutes apart: one changed at every fetch, the other
    at every `slow_every`-th (0: never). (now, the first's next due time, the second's)."""
    made, clock = refresher(policy, rate=rate)
    fast, slow = "http://a.test/fast", "http://b.test/slow"
    for k in range(13):
        clock.now += 600.0
        made.fetched(fast, status=200, fingerprint=k, etag=None, last_modified=None, depth=0)
        changed = slow_every and k % slow_every == 0
        made.fetched(
            slow, status=200, fingerprint=k // slow_every if changed else 0, etag=None, last_modified=None, depth=0
        )
    fast_due, slow_due = made.schedule.due_time(fast), made.schedule.due_time(slow)
    assert fast_due is not None and slow_due is not None
    return clock.now, fast_due, slow_due


def test_proportional_comes_back_sooner_to_the_page_that_changes_more() -> None:
    now, fast, slow = two_pages(Proportional(), rate=0.001, slow_every=4)
    assert now + 10.0 <= fast < slow <= now + 10_000.0


def test_a_page_that_never_changed_waits_longest() -> None:
    for policy in (Proportional(), Optimal()):
        now, fast, slow = two_pages(policy, rate=0.001, slow_every=0)
        assert fast < slow == pytest.approx(now + 10_000.0), policy


def test_optimal_gives_up_on_a_page_that_changes_too_often_for_its_budget() -> None:
    """Cho & Garcia-Molina: with a budget too small to keep the fast page fresh, a fetch of the slower
    one buys more freshness: the fast page gets the longest interval, the slow one a shorter one; with
    a budget for both, the fast page is fetched more often."""
    now, fast, slow = two_pages(Optimal(), rate=0.001, slow_every=4)
    assert slow < fast == pytest.approx(now + 10_000.0)
    now, fast, slow = two_pages(Optimal(), rate=0.01, slow_every=4)
    assert fast < slow


def test_uniform_gives_every_page_the_same_interval() -> None:
    made, clock = refresher(Uniform(), rate=0.01)
    made.fetched("http://a.test/1", status=200, fingerprint=1, etag=None, last_modified=None, depth=0)
    made.fetched("http://a.test/2", status=200, fingerprint=1, etag=None, last_modified=None, depth=0)
    one, two = made.schedule.due_time("http://a.test/1"), made.schedule.due_time("http://a.test/2")
    assert one is not None and two is not None
    assert two - clock.now == pytest.approx(200.0)  # two pages at 0.01 fetches per second: every 200 s


def test_the_feed_keeps_to_the_refresh_budget() -> None:
    made, clock = refresher(rate=2.0)
    for k in range(50):
        made.schedule.put(f"http://a.test/{k}", clock.now - 1.0)
    assert made.due(100, lease=60.0) == []  # no budget yet: it accrues from the first call
    handed = 0
    for _ in range(10):
        clock.now += 1.0
        handed += len(made.due(100, lease=60.0))
    assert handed == 20  # 2 a second for 10 seconds
    assert made.due(100, lease=60.0) == []
    clock.now += 100.0  # a pause: at most a second's worth at once
    assert len(made.due(100, lease=60.0)) == 2


def test_a_second_copy_of_a_refresh_is_dropped() -> None:
    made, clock = refresher()
    made.fetched("http://a.test/", status=200, fingerprint=1, etag=None, last_modified=None, depth=0)
    clock.now += 5.0
    assert made.recently_fetched("http://a.test/")
    clock.now += 10.0
    assert not made.recently_fetched("http://a.test/") and not made.recently_fetched("http://b.test/")


def test_the_rate_limit_spaces_fetches() -> None:
    limit = RateLimit(4.0)
    waits = [limit.reserve(10.0) for _ in range(4)]
    assert waits == pytest.approx([0.0, 0.25, 0.5, 0.75])
    assert limit.reserve(20.0) == 0.0  # idle since: no debt, no burst beyond one
    assert limit.reserve(20.0) == pytest.approx(0.25)
    burst = RateLimit(4.0, burst=3.0)
    assert [burst.reserve(5.0) for _ in range(4)] == pytest.approx([0.0, 0.0, 0.0, 0.25])
    with pytest.raises(ValueError):
        RateLimit(0.0)


def _spam_and_linked_pages(quality: str) -> tuple[int, int, Refresher]:
    """30 pages that change about every 100 s, each linked by all the others, and 5 spam pages that
    change on every fetch and that nobody links, refreshed by optimal at 1 fetch/s for an hour of a fake
    clock; the refetches of the spam pages and of the others."""
    import random

    clock = Clock()
    made = Refresher(
        MemorySchedule(), Optimal(), 1.0, min_interval=10.0, max_interval=10_000.0, clock=clock, refit_every=600.0,
        quality=quality,  # type: ignore[arg-type]
    )  # fmt: skip
    generator = random.Random(3)
    linked = [f"http://good.test/{k}" for k in range(30)]
    spam = [f"http://spam.test/{k}" for k in range(5)]
    changes = {url: 0.0 for url in linked}  # time of each good page's last change
    versions = {url: 0 for url in linked + spam}
    refetches = {url: 0 for url in linked + spam}

    def fetch(url: str) -> None:
        if url in changes:
            while changes[url] + (gap := generator.expovariate(0.01)) <= clock.now:
                changes[url] += gap
                versions[url] += 1
        else:
            versions[url] += 1  # a different body at every request
        made.fetched(
            url, status=200, fingerprint=versions[url], etag=None, last_modified=None, depth=1,
            links=linked if url in changes else (),
        )  # fmt: skip

    start = clock.now
    for url in linked + spam:
        fetch(url)
        clock.now += 0.5
    for key in changes:
        changes[key] = start
    while clock.now < start + 3600.0:
        clock.now += 1.0
        for url, _ in made.due(10, lease=600.0):
            refetches[url] += 1
            fetch(url)
    return sum(refetches[url] for url in spam), sum(refetches[url] for url in linked), made


def test_quality_weights_give_spam_that_changes_on_every_fetch_fewer_refreshes() -> None:
    """IIR 20.2.3: unweighted, a page that changes on every fetch looks like a page changing about once
    per interval (a change seen every time: the estimate can say no more), and optimal keeps
    refetching it; weighted by in-links, the well-linked pages take that budget."""
    spam_plain, linked_plain, plain = _spam_and_linked_pages("none")
    spam_weighted, linked_weighted, weighted = _spam_and_linked_pages("in-links")
    assert weighted.weight("http://good.test/0") == pytest.approx(math.log2(2 + 29))
    assert weighted.weight("http://spam.test/0") == 1.0 and plain.weight("http://good.test/0") == 1.0
    assert spam_plain > 50, (spam_plain, linked_plain)  # unweighted optimal does spend on the spam
    assert spam_weighted < spam_plain / 2, (spam_weighted, spam_plain)
    assert linked_weighted > linked_plain, (linked_weighted, linked_plain)


def test_a_dropped_second_copy_gives_the_page_its_due_time_back_and_the_budget_too() -> None:
    """A copy handed out after the first copy's refetch (the lease it took is 600 s) is dropped as
    recently fetched: the page must not wait out that lease, but come back when its last fetch said."""
    made, clock = refresher(Uniform(), rate=0.01)
    made.fetched("http://a.test/", status=200, fingerprint=1, etag=None, last_modified=None, depth=0)
    due = made.schedule.due_time("http://a.test/")
    assert due is not None and due > clock.now
    clock.now += 1.0
    assert [item.url for item in made.schedule.take(clock.now, 10, lease=600.0, until=math.inf)] == ["http://a.test/"]
    assert made.schedule.due_time("http://a.test/") == pytest.approx(clock.now + 600.0)  # leased again
    assert made.recently_fetched("http://a.test/")
    assert made.schedule.due_time("http://a.test/") == pytest.approx(due)


def test_the_work_conserving_feed_does_not_hand_out_a_page_still_out() -> None:
    made, clock = refresher(rate=5.0)
    made.schedule.put("http://a.test/1", clock.now + 100.0)
    made.schedule.put("http://a.test/2", clock.now + 200.0)
    made.due(10, lease=600.0)
    clock.now += 2.0  # the budget unspent for a second: pages due later go early
    assert sorted(url for url, _ in made.due(10, lease=600.0)) == ["http://a.test/1", "http://a.test/2"]
    clock.now += 2.0  # both still out (leased, not fetched): not handed out a second time
    assert made.due(10, lease=600.0) == []
    clock.now += 700.0  # their leases ran out unfetched: out again
    assert len(made.due(10, lease=600.0)) == 2


def _linked_and_unlinked_pages(quality: str) -> tuple[int, int, Refresher]:
    """20 pages that every page links and 20 that nobody links, all changing about every 200 s (the
    same Poisson process, drawn alike), refreshed by optimal at 0.5 fetch/s for two hours of a fake
    clock; the refetches of each group."""
    import random

    from crawlspace.policies.pagerank import PartialPageRank

    clock = Clock()
    made = Refresher(
        MemorySchedule(), Optimal(), 0.5, min_interval=10.0, max_interval=10_000.0, clock=clock, refit_every=300.0,
        quality=quality,  # type: ignore[arg-type]
        pagerank=PartialPageRank(interval=5, background=False) if quality == "pagerank" else None,
    )  # fmt: skip
    linked = [f"http://hub.test/{k}" for k in range(20)]
    unlinked = [f"http://leaf.test/{k}" for k in range(20)]
    generators = {url: random.Random(k % 20) for k, url in enumerate(linked + unlinked)}  # pairs change alike
    changes = {url: 0.0 for url in linked + unlinked}
    versions = {url: 0 for url in linked + unlinked}
    refetches = {url: 0 for url in linked + unlinked}

    def fetch(url: str) -> None:
        while changes[url] + (gap := generators[url].expovariate(1 / 200.0)) <= clock.now:
            changes[url] += gap
            versions[url] += 1
        made.fetched(url, status=200, fingerprint=versions[url], etag=None, last_modified=None, depth=1, links=linked)

    start = clock.now
    for url in linked + unlinked:
        fetch(url)
        clock.now += 0.5
    for key in changes:
        changes[key] = start
    while clock.now < start + 7200.0:
        clock.now += 1.0
        for url, _ in made.due(10, lease=600.0):
            refetches[url] += 1
            fetch(url)
    made.close()
    return sum(refetches[url] for url in linked), sum(refetches[url] for url in unlinked), made


def test_pagerank_weights_refresh_the_pages_the_web_links_more_than_equally_changing_ones_it_does_not() -> None:
    """refresh_weights = "pagerank": the partial PageRank of the links found (policies.PartialPageRank,
    each page's links taken once however often it is refetched) moves the budget towards the linked
    pages; unweighted, the two groups, changing alike, share it about evenly."""
    linked_plain, unlinked_plain, _ = _linked_and_unlinked_pages("none")
    linked_ranked, unlinked_ranked, ranked = _linked_and_unlinked_pages("pagerank")
    assert abs(linked_plain - unlinked_plain) < 0.15 * (linked_plain + unlinked_plain), (linked_plain, unlinked_plain)
    assert linked_ranked > 1.5 * unlinked_ranked, (linked_ranked, unlinked_ranked)
    assert linked_ranked > linked_plain and unlinked_ranked < unlinked_plain
    assert ranked.weight("http://hub.test/0") > 2.0 > 1.3 > ranked.weight("http://leaf.test/0") >= 1.0
    assert ranked.pagerank is not None
    stats = ranked.pagerank.stats()
    assert stats["edges"] == 40 * 20 - 20  # each page's links once (less the hubs' links to themselves)
    assert stats["computations"] > 0


def test_a_page_refetched_adds_its_links_to_the_pagerank_graph_once() -> None:
    from crawlspace.policies.base import Outlink
    from crawlspace.policies.pagerank import PartialPageRank

    ranks = PartialPageRank(interval=1, background=False)
    links = [Outlink("http://b.test/"), Outlink("http://c.test/")]
    assert ranks.observe_once("http://a.test/", links)
    assert not ranks.observe_once("http://a.test/", links)
    assert ranks.stats()["edges"] == 2
    assert ranks.relative_rank("http://b.test/") > ranks.relative_rank("http://a.test/")
    assert ranks.relative_rank("http://unknown.test/") == pytest.approx(0.15)


def test_after_a_resume_the_policy_is_fitted_to_the_pages_refetched_not_to_none() -> None:
    """A resumed refresher starts with an empty sample; a page enters it at its first fetch of the run
    (it used to enter only at its first fetch ever, so a crawl with nothing new to find was fitted to
    the one page being rescheduled)."""
    schedule = MemorySchedule()
    clock = Clock()
    before = Refresher(schedule, Optimal(), 1.0, min_interval=10.0, max_interval=10_000.0, clock=clock)
    urls = [f"http://a.test/{k}" for k in range(20)]
    for url in urls:
        before.fetched(url, status=200, fingerprint=1, etag=None, last_modified=None, depth=0)
    clock.now += 100.0
    resumed = Refresher(schedule, Optimal(), 1.0, min_interval=10.0, max_interval=10_000.0, clock=clock)
    for url in urls:
        clock.now += 1.0
        resumed.fetched(url, status=200, fingerprint=2, etag=None, last_modified=None, depth=0)
    assert set(resumed._sample) == set(urls)
    resumed.fetched(urls[0], status=200, fingerprint=3, etag=None, last_modified=None, depth=0)
    assert len(resumed._sample) == len(urls) and resumed._pages_seen == len(urls)  # once per run
