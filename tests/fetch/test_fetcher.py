"""The fetcher's contract beyond misbehaving servers: identity headers, conditional GET, decoding,
per-host connection limit, the SSRF guard on the connection (literals, DNS rebinding), TLS
verification, and outcomes for DNS failures and refused connections."""

from __future__ import annotations

import asyncio
import datetime
import socket
from collections.abc import Iterator

import pytest
import trustme

from crawlspace.dns import AddressGuard, Resolver
from crawlspace.fetch import FetchResult, Outcome
from crawlspace.fetch.fetcher import Fetcher, Validators
from tests.fetch.conftest import NO_DNS_SERVER, make_fetcher, offline_resolver
from tests.fetch.hostile_server import ETAG, LAST_MODIFIED, HostileServer


def fetch_all(fetcher: Fetcher, urls: list[str], **kwargs: object) -> list[FetchResult]:
    async def go() -> list[FetchResult]:
        async with fetcher:
            return [await fetcher.fetch(url, **kwargs) for url in urls]  # type: ignore[arg-type]

    return asyncio.run(go())


def test_user_agent_and_from_identify_the_crawler(hostile: HostileServer) -> None:
    fetcher = make_fetcher(user_agent="crawlspace/0.1 (+https://example.org/bot)", from_header="ops@example.org")
    [result] = fetch_all(fetcher, [hostile.url("/echo")])
    echoed = hostile.requests_for("/echo")[-1].headers
    assert echoed["user-agent"] == "crawlspace/0.1 (+https://example.org/bot)"
    assert echoed["from"] == "ops@example.org"
    assert echoed["accept-encoding"] == "gzip, deflate, br, zstd"
    assert "cookie" not in echoed
    assert ("User-Agent", "crawlspace/0.1 (+https://example.org/bot)") in result.request_headers


def test_conditional_get_sends_validators_and_reports_not_modified(hostile: HostileServer) -> None:
    fetcher = make_fetcher()

    async def go() -> tuple[FetchResult, FetchResult, FetchResult]:
        async with fetcher:
            first = await fetcher.fetch(hostile.url("/conditional"))
            again = await fetcher.fetch(hostile.url("/conditional"), validators=first.validators)
            by_date = await fetcher.fetch(
                hostile.url("/conditional"), validators=Validators(last_modified=LAST_MODIFIED)
            )
            return first, again, by_date

    first, again, by_date = asyncio.run(go())
    assert first.status == 200 and first.validators == Validators(ETAG, LAST_MODIFIED)
    assert again.status == 304 and again.not_modified and again.outcome is Outcome.REDIRECT  # 3xx by code
    assert by_date.not_modified
    sent = hostile.requests_for("/conditional")[-2:]
    assert sent[0].headers["if-none-match"] == ETAG
    assert sent[0].headers["if-modified-since"] == LAST_MODIFIED
    assert "if-none-match" not in sent[1].headers
    assert fetcher.not_modified == 2


def test_compressed_page_is_kept_raw_and_decoded_beside(hostile: HostileServer) -> None:
    [result] = fetch_all(make_fetcher(), [hostile.url("/gzip-page")])
    assert result.outcome is Outcome.OK
    assert result.body[:2] == b"\x1f\x8b"  # as sent, for the WARC record
    assert result.content().startswith(b"<html><body><p>compressed text</p>")
    assert result.content(10) == b"<html><bod"


def test_retry_after_in_seconds_and_as_a_date() -> None:
    now = datetime.datetime(2026, 12, 1, 10, 0, 0, tzinfo=datetime.UTC).timestamp()

    def with_header(value: str) -> FetchResult:
        return FetchResult("http://x.test/", Outcome.SERVER_ERROR, 503, headers=[("Retry-After", value)])

    assert with_header("120").retry_after(now) == 120.0
    assert with_header("Tue, 01 Dec 2026 10:01:30 GMT").retry_after(now) == 90.0
    assert with_header("Tue, 01 Dec 2026 09:00:00 GMT").retry_after(now) == 0.0  # in the past
    assert with_header("99999999").retry_after(now) == 86400.0  # capped
    assert with_header("soon").retry_after(now) is None


def test_per_host_connection_limit_holds_from_the_server_side() -> None:
    with HostileServer("127.0.0.3") as server:
        fetcher = make_fetcher(max_conn_per_host=1)

        async def go() -> list[FetchResult]:
            async with fetcher:
                return await asyncio.gather(*(fetcher.fetch(server.url("/slow-ok")) for _ in range(4)))

        results = asyncio.run(go())
        assert [r.outcome for r in results] == [Outcome.OK] * 4
        assert server.max_active == 1
        assert server.connections == 1  # keep-alive: one connection served all four


def test_ip_literal_outside_the_allow_list_is_refused_without_connecting() -> None:
    with HostileServer("127.0.0.4") as server:
        guard = AddressGuard(allow_networks=["127.0.0.1/32"])
        [result] = fetch_all(make_fetcher(guard=guard), [server.url("/ok")])
        assert result.outcome is Outcome.GUARD_REFUSED
        assert "loopback" in result.error
        assert server.connections == 0
        assert guard.stats()["hosts"]["127.0.0.4"]["count"] == 1


def test_names_are_checked_after_resolution(hostile: HostileServer) -> None:
    resolver = offline_resolver({"intranet.test": "127.0.0.1"})
    guard = AddressGuard()  # default: nothing private
    before = hostile.connections
    [result] = fetch_all(make_fetcher(resolver=resolver, guard=guard), [hostile.url("/ok", host="intranet.test")])
    assert result.outcome is Outcome.GUARD_REFUSED
    assert hostile.connections == before
    assert guard.refusals["intranet.test"].reason == "loopback"


class FlippingResolver(Resolver):
    """A DNS that answers differently each time (the rebinding attack): public-looking first, then internal."""

    def __init__(self, answers: list[str]) -> None:
        super().__init__(use_system_hosts=False, nameservers=[NO_DNS_SERVER])
        self.answers = answers
        self.calls = 0

    async def resolve(self, host: str) -> str:
        self.calls += 1
        return self.answers[min(self.calls - 1, len(self.answers) - 1)]


def test_connection_goes_to_the_checked_address_dns_rebinding() -> None:
    with HostileServer("127.0.0.5") as allowed, HostileServer("127.0.0.6", port=0) as internal:
        resolver = FlippingResolver(["127.0.0.5", "127.0.0.6"])
        guard = AddressGuard(allow_networks=["127.0.0.5/32"])
        fetcher = make_fetcher(resolver=resolver, guard=guard, keepalive_timeout=0)
        url = allowed.url("/ok", host="rebind.test")
        results = fetch_all(fetcher, [url, url])
        assert results[0].outcome is Outcome.OK and results[0].address == "127.0.0.5"
        # second connection: the answer changed to an internal address, which is checked and refused
        assert results[1].outcome is Outcome.GUARD_REFUSED
        assert internal.connections == 0
        assert resolver.calls == 2  # one lookup per connection, never a second one behind the guard's back


def test_unresolvable_host_is_a_dns_error() -> None:
    from tests.dns.fake_dns import FakeDNS

    with FakeDNS() as dns:
        resolver = Resolver(use_system_hosts=False, nameservers=[dns.address], timeout=0.5, tries=1)
        [result] = fetch_all(make_fetcher(resolver=resolver), ["http://nowhere.test/"])
        assert result.outcome is Outcome.DNS_ERROR
        assert "nowhere.test" in result.error


def test_closed_port_is_connection_refused() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    [result] = fetch_all(make_fetcher(), [f"http://127.0.0.1:{port}/"])
    assert result.outcome is Outcome.CONNECTION_REFUSED


@pytest.fixture(scope="module")
def tls_server() -> Iterator[HostileServer]:
    """An HTTPS host whose certificate no trust store knows (signed by a throwaway CA)."""
    certificate = trustme.CA().issue_cert("self-signed.test")
    chain = b"".join(pem.bytes() for pem in certificate.cert_chain_pems)
    with HostileServer("127.0.0.7", tls=(chain, certificate.private_key_pem.bytes())) as server:
        yield server


def test_tls_certificates_are_verified_by_default(tls_server: HostileServer) -> None:
    resolver = offline_resolver({"self-signed.test": "127.0.0.7"})
    url = tls_server.url("/ok", host="self-signed.test")
    [refused] = fetch_all(make_fetcher(resolver=resolver), [url])
    assert refused.outcome is Outcome.TLS_ERROR
    assert "certificate" in refused.error.lower()
    [accepted] = fetch_all(make_fetcher(resolver=resolver, verify_tls=False), [url])
    assert accepted.outcome is Outcome.OK


def test_every_attempt_is_counted_by_outcome(hostile: HostileServer) -> None:
    fetcher = make_fetcher()
    fetch_all(fetcher, [hostile.url(p) for p in ("/ok", "/ok", "/nothing", "/garbage-status", "/loop/a")])
    stats = fetcher.stats()
    assert stats["attempts"] == 5
    assert stats["outcomes"] == {"2xx": 2, "3xx": 1, "4xx": 1, "bad-response": 1}


def test_https_connections_are_kept_alive_and_carry_the_name_for_sni(tls_server: HostileServer) -> None:
    resolver = offline_resolver({"self-signed.test": "127.0.0.7"})
    before = tls_server.connections
    results = fetch_all(
        make_fetcher(resolver=resolver, verify_tls=False), [tls_server.url("/ok", host="self-signed.test")] * 3
    )
    assert [r.outcome for r in results] == [Outcome.OK] * 3
    assert {r.address for r in results} == {"127.0.0.7"}
    assert tls_server.connections - before == 1
    assert all(("Host", f"self-signed.test:{tls_server.port}") in r.request_headers for r in results)
