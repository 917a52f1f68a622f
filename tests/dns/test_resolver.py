"""The resolver against a scripted DNS server on loopback: order of authority, TTL clamping,
negative caching, backoff of timeouts (from the server's side: how often it was really asked),
coalescing, prefetch and bounded memory. Cache time runs on an injected clock."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlspace.dns import DNSFailure, Resolver, read_hosts_file
from crawlspace.dns.resolver import Backoff, hostname_of_authority
from tests.dns.fake_dns import FakeDNS


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def dns() -> Iterator[FakeDNS]:
    with FakeDNS() as server:
        yield server


def make(dns: FakeDNS, clock: Clock, **options: object) -> Resolver:
    options.setdefault("timeout", 0.2)
    options.setdefault("tries", 1)
    return Resolver(use_system_hosts=False, nameservers=[dns.address], clock=clock, **options)  # type: ignore[arg-type]


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def resolve_or_failure(resolver: Resolver, name: str) -> str | DNSFailure:
    try:
        return await resolver.resolve(name)
    except DNSFailure as exc:
        return exc


def test_fixed_mappings_then_hosts_file_then_dns(dns: FakeDNS, tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("# comment\n192.0.2.10 both.test file-only.test  # trailing\nnot-an-ip bad.test\n\n")
    dns.set("both.test", addresses=["192.0.2.99"])
    dns.set("dns-only.test", addresses=["192.0.2.30"])
    resolver = make(dns, Clock(), overrides={"Both.Test": "192.0.2.20"}, hosts_file=str(hosts))

    async def go() -> list[str]:
        answers = [await resolver.resolve(n) for n in ("both.test", "file-only.test", "dns-only.test", "192.0.2.7")]
        await resolver.close()
        return answers

    assert run(go()) == ["192.0.2.20", "192.0.2.10", "192.0.2.30", "192.0.2.7"]
    assert dns.queries["both.test"] == 0 and dns.queries["file-only.test"] == 0
    assert resolver.static_answers == 2 and resolver.lookups == 1


def test_ttl_is_honoured_within_bounds(dns: FakeDNS) -> None:
    clock = Clock()
    dns.set("short.test", addresses=["192.0.2.1"], ttl=5)  # raised to min_ttl
    dns.set("long.test", addresses=["192.0.2.2"], ttl=10**6)  # lowered to max_ttl
    dns.set("normal.test", addresses=["192.0.2.3"], ttl=300)
    resolver = make(dns, clock, min_ttl=60, max_ttl=1000)

    async def go() -> None:
        for name in ("short.test", "long.test", "normal.test"):
            await resolver.resolve(name)
        clock.now += 59
        for name in ("short.test", "long.test", "normal.test"):
            await resolver.resolve(name)
        assert resolver.lookups == 3 and resolver.hits == 3
        clock.now += 2  # 61 s: short.test expired (60), the others not
        await resolver.resolve("short.test")
        await resolver.resolve("normal.test")
        assert resolver.lookups == 4
        clock.now += 300  # 361 s: normal.test expired, long.test (1000) not
        await resolver.resolve("normal.test")
        await resolver.resolve("long.test")
        assert resolver.lookups == 5
        clock.now += 700  # 1061 s
        await resolver.resolve("long.test")
        assert resolver.lookups == 6
        await resolver.close()

    run(go())


def test_nxdomain_is_cached_and_reported_once(dns: FakeDNS) -> None:
    clock = Clock()
    reported: list[tuple[str, str]] = []
    resolver = make(dns, clock, negative_ttl=600, on_unresolvable=lambda host, why: reported.append((host, why)))

    async def go() -> list[str | DNSFailure]:
        outcomes = [await resolve_or_failure(resolver, "gone.test") for _ in range(50)]  # 50 URLs of one host
        clock.now += 601
        outcomes.append(await resolve_or_failure(resolver, "gone.test"))
        await resolver.close()
        return outcomes

    outcomes = run(go())
    assert all(isinstance(o, DNSFailure) and not o.temporary for o in outcomes)
    assert resolver.lookups == 2  # once, then again only after the negative TTL
    assert dns.queries["gone.test"] == 4  # A and AAAA, twice
    assert resolver.negative_hits == 49
    assert reported == [("gone.test", "Domain name not found")]  # once, not per URL nor per lookup
    assert resolver.stats()["unresolvable"] == {"gone.test": "Domain name not found"}


@pytest.mark.parametrize("kind", ["drop", "servfail"])
def test_timeouts_back_off_then_give_up(dns: FakeDNS, kind: str) -> None:
    clock = Clock()
    dns.set("flaky.test", kind=kind)
    resolver = make(dns, clock, backoff=Backoff(attempts=5, initial=1.0, maximum=90.0))

    async def go() -> list[float]:
        waits = []
        for _attempt in range(4):
            failure = await resolve_or_failure(resolver, "flaky.test")
            assert isinstance(failure, DNSFailure) and failure.temporary
            assert failure.retry_at is not None
            waits.append(failure.retry_at - clock.now)
            # every URL of the host asking meanwhile is answered at once, without a query
            asked = dns.queries["flaky.test"]
            for _ in range(20):
                again = await resolve_or_failure(resolver, "flaky.test")
                assert isinstance(again, DNSFailure) and again.retry_at == failure.retry_at
            assert dns.queries["flaky.test"] == asked
            clock.now = failure.retry_at
        final = await resolve_or_failure(resolver, "flaky.test")
        assert isinstance(final, DNSFailure) and not final.temporary and "5 attempts" in final.reason
        clock.now += 100
        assert isinstance(await resolve_or_failure(resolver, "flaky.test"), DNSFailure)
        await resolver.close()
        return waits

    waits = run(go())
    assert waits[0] == pytest.approx(1.0)
    assert waits[-1] == pytest.approx(90.0)
    assert waits == sorted(waits)
    assert resolver.lookups == 5 and resolver.retries == 4
    assert "flaky.test" in resolver.unresolvable


def test_backoff_schedule() -> None:
    backoff = Backoff(attempts=5, initial=1.0, maximum=90.0)
    waits = [backoff.wait(n) for n in range(1, 6)]
    assert waits[0] == 1.0 and waits[3] == pytest.approx(90.0) and waits[4] is None
    assert sum(w for w in waits if w is not None) < 120
    assert Backoff(attempts=1).wait(1) is None


def test_success_after_temporary_failures_clears_the_backoff(dns: FakeDNS) -> None:
    clock = Clock()
    dns.set("recovers.test", kind="servfail")
    resolver = make(dns, clock)

    async def go() -> str | DNSFailure:
        first = await resolve_or_failure(resolver, "recovers.test")
        assert isinstance(first, DNSFailure) and first.retry_at is not None
        dns.set("recovers.test", addresses=["192.0.2.5"])
        clock.now = first.retry_at
        answer = await resolve_or_failure(resolver, "recovers.test")
        await resolver.close()
        return answer

    assert run(go()) == "192.0.2.5"
    assert resolver.unresolvable == {}


def test_concurrent_lookups_of_one_name_are_merged(dns: FakeDNS) -> None:
    dns.set("popular.test", addresses=["192.0.2.8"])
    resolver = make(dns, Clock())

    async def go() -> list[str]:
        answers = await asyncio.gather(*(resolver.resolve("popular.test") for _ in range(10)))
        await resolver.close()
        return answers

    assert run(go()) == ["192.0.2.8"] * 10
    assert resolver.lookups == 1 and resolver.hits == 9
    assert dns.queries["popular.test"] == 2


def test_concurrent_waiters_share_a_failure(dns: FakeDNS) -> None:
    resolver = make(dns, Clock())

    async def go() -> list[str | DNSFailure]:
        answers = await asyncio.gather(*(resolve_or_failure(resolver, "void.test") for _ in range(5)))
        await resolver.close()
        return answers

    assert all(isinstance(a, DNSFailure) for a in run(go()))
    assert resolver.lookups == 1


def test_prefetch_fills_the_cache_in_the_background(dns: FakeDNS) -> None:
    dns.set("next.test", addresses=["192.0.2.9"])
    resolver = make(dns, Clock(), overrides={"static.test": "192.0.2.1"})

    async def go() -> str:
        resolver.prefetch("next.test:8080")  # an authority, as the frontier knows hosts
        resolver.prefetch("next.test")  # already on its way: nothing more
        resolver.prefetch("static.test")
        resolver.prefetch("192.0.2.44")
        resolver.prefetch("[2001:db8::1]:443")
        for _ in range(100):
            await asyncio.sleep(0.01)
            if resolver.cached("next.test"):
                break
        answer = await resolver.resolve("next.test")
        resolver.prefetch("next.test")  # cached: nothing to do
        await resolver.close()
        return answer

    assert run(go()) == "192.0.2.9"
    assert resolver.prefetches == 1 and resolver.lookups == 1 and resolver.hits == 1


def test_prefetch_of_a_dead_host_does_not_raise_and_counts_once(dns: FakeDNS) -> None:
    resolver = make(dns, Clock())

    async def go() -> None:
        resolver.prefetch("dead.test")
        await asyncio.sleep(0.3)
        resolver.prefetch("dead.test")  # negatively cached: no second lookup
        await resolver.close()

    run(go())
    assert resolver.lookups == 1 and resolver.prefetches == 1


def test_close_cancels_prefetches_in_flight(dns: FakeDNS) -> None:
    dns.set("slow.test", kind="drop")
    resolver = make(dns, Clock(), timeout=5.0)

    async def go() -> None:
        resolver.prefetch("slow.test")
        await asyncio.sleep(0.05)
        await asyncio.wait_for(resolver.close(), 2.0)

    run(go())


def test_ipv4_preferred_ipv6_used_when_alone(dns: FakeDNS) -> None:
    dns.set("dual.test", addresses=["2001:db8::1", "192.0.2.1"])
    dns.set("v6.test", addresses=["2001:db8::2"])
    resolver = make(dns, Clock())

    async def go() -> list[str]:
        answers = [await resolver.resolve("dual.test"), await resolver.resolve("v6.test")]
        await resolver.close()
        return answers

    assert run(go()) == ["192.0.2.1", "2001:db8::2"]


def test_cache_size_is_bounded(dns: FakeDNS) -> None:
    for i in range(30):
        dns.set(f"h{i}.test", addresses=[f"192.0.2.{i + 1}"])
    resolver = make(dns, Clock(), max_entries=10)

    async def go() -> None:
        for i in range(30):
            await resolver.resolve(f"h{i}.test")
        await resolver.close()

    run(go())
    assert len(resolver) <= 10
    assert resolver.cached("h29.test") == "192.0.2.30"  # the newest stay


def test_cached_answers_feed_per_ip_politeness(dns: FakeDNS) -> None:
    dns.set("a.test", addresses=["192.0.2.1"])
    resolver = make(dns, Clock(), overrides={"b.test": "192.0.2.1"})
    assert resolver.cached("a.test") is None  # unknown until resolved; never blocks

    async def go() -> None:
        await resolver.resolve("a.test")
        await resolver.close()

    run(go())
    assert resolver.cached("a.test") == resolver.cached("b.test") == "192.0.2.1"
    assert resolver.cached("192.0.2.77") == "192.0.2.77"


def test_stats_report_the_hit_rate(dns: FakeDNS) -> None:
    dns.set("x.test", addresses=["192.0.2.1"])
    resolver = make(dns, Clock())

    async def go() -> None:
        for _ in range(4):
            await resolver.resolve("x.test")
        await resolve_or_failure(resolver, "y.test")
        await resolve_or_failure(resolver, "y.test")
        await resolver.close()

    run(go())
    stats = resolver.stats()
    assert stats["lookups"] == 2 and stats["hits"] == 3 and stats["negative_hits"] == 1
    assert stats["hit_rate"] == pytest.approx(4 / 6, abs=1e-3)
    assert stats["failures"] == 1 and stats["unresolvable_hosts"] == 1


def test_hosts_file_parsing(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text("127.0.0.1 localhost Local.Test.\n::1 localhost ip6-localhost\n# 10.0.0.1 hidden\nbogus line\n")
    assert read_hosts_file(path) == {"localhost": "127.0.0.1", "local.test": "127.0.0.1", "ip6-localhost": "::1"}
    assert read_hosts_file(tmp_path / "missing") == {}


def test_hostname_of_authority() -> None:
    assert hostname_of_authority("Example.COM:8080") == "example.com"
    assert hostname_of_authority("[2001:DB8::1]:443") == "2001:db8::1"
    assert hostname_of_authority("example.com.") == "example.com"


def test_unreachable_name_server_costs_one_fresh_channel_not_one_per_lookup() -> None:
    clock = Clock()
    resolver = Resolver(use_system_hosts=False, nameservers=["127.0.0.1:9"], timeout=0.3, tries=1, clock=clock)

    async def go() -> list[str | DNSFailure]:
        answers = [await resolve_or_failure(resolver, f"h{i}.test") for i in range(3)]
        await resolver.close()
        return answers

    answers = run(go())
    assert all(isinstance(a, DNSFailure) and a.temporary for a in answers)
    assert resolver.channel_resets == 1
