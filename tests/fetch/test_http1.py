"""The fetcher's HTTP/1.1 client on what the hostile suite does not script: URL cutting, responses framed
by the connection's end, interim 1xx responses, chunked keep-alive, the pool's limits and idle expiry,
and request headers that would split the request. Each server here is scripted byte by byte, in the
test's own event loop, on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from crawlspace.fetch import FetchResult, Outcome
from crawlspace.fetch.fetcher import Fetcher
from crawlspace.fetch.http1 import Origin, split_url
from tests.fetch.conftest import make_fetcher, offline_resolver

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, "Scripted"], Awaitable[None]]
NAMES = [f"host{n}.test" for n in range(5)]


@pytest.mark.parametrize(
    ("url", "origin", "target"),
    [
        ("http://example.org/a/b?q=1", Origin("http", "example.org", 80), "/a/b?q=1"),
        ("https://example.org", Origin("https", "example.org", 443), "/"),
        ("http://example.org?q", Origin("http", "example.org", 80), "/?q"),
        ("http://Example.ORG:8080/x#frag", Origin("http", "example.org", 8080), "/x"),
        ("http://user:secret@example.org/x", Origin("http", "example.org", 80), "/x"),
        ("http://[::1]:8000/p", Origin("http", "[::1]", 8000), "/p"),
        ("HTTP://127.0.0.1/", Origin("http", "127.0.0.1", 80), "/"),
    ],
)
def test_a_url_is_cut_into_origin_and_request_target(url: str, origin: Origin, target: str) -> None:
    assert split_url(url) == (origin, target)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.org/",
        "example.org/path",
        "http://exämple.org/",
        "http://example.org:99999/",
        "http://example.org:80x/",
        "http:///path",
        "http://example.org/a b",
        "http://[::1/",
    ],
)
def test_a_url_that_cannot_be_requested_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="invalid URL"):
        split_url(url)


def test_the_host_header_names_the_port_only_when_it_is_not_the_default() -> None:
    assert Origin("http", "example.org", 80).host_header == "example.org"
    assert Origin("https", "example.org", 443).host_header == "example.org"
    assert Origin("http", "example.org", 443).host_header == "example.org:443"


@dataclass
class Scripted:
    """A server running `handler` on every connection; what it saw."""

    port: int = 0
    connections: int = 0
    active: int = 0
    max_active: int = 0
    closed_by_client: int = 0
    requests: list[bytes] = field(default_factory=list)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


async def read_request(reader: asyncio.StreamReader, seen: Scripted) -> bool:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        seen.closed_by_client += 1
        return False
    seen.requests.append(head)
    return True


async def serving(handler: Handler) -> tuple[asyncio.Server, Scripted]:
    seen = Scripted()

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.connections += 1
        seen.active += 1
        seen.max_active = max(seen.max_active, seen.active)
        try:
            await handler(reader, writer, seen)
        finally:
            seen.active -= 1
            writer.close()

    server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    seen.port = server.sockets[0].getsockname()[1]
    return server, seen


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def answering(*parts: bytes, delay: float = 0.0, keep_alive: bool = True) -> Handler:
    """A handler that answers each request (only the first, without `keep_alive`) with `parts`, each
    written and drained in turn, after `delay` seconds."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: Scripted) -> None:
        while await read_request(reader, seen):
            await asyncio.sleep(delay)
            for part in parts:
                writer.write(part)
                await writer.drain()
            if not keep_alive:
                return

    return handler


def run_against(
    handler: Handler,
    client: Callable[[Fetcher, Scripted], Awaitable[list[FetchResult]]],
    **fetcher_options: object,
) -> tuple[list[FetchResult], Scripted]:
    async def go() -> tuple[list[FetchResult], Scripted]:
        server, seen = await serving(handler)
        async with server, make_fetcher(**fetcher_options) as fetcher:
            results = await client(fetcher, seen)
            await asyncio.sleep(0.05)  # the server's side of closes
        return results, seen

    return asyncio.run(go())


async def fetch_twice(fetcher: Fetcher, seen: Scripted) -> list[FetchResult]:
    return [await fetcher.fetch(seen.url("/one")), await fetcher.fetch(seen.url("/two"))]


def test_a_body_without_length_ends_with_the_connection_and_the_next_request_opens_another() -> None:
    handler = answering(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<p>until the end</p>", keep_alive=False)
    results, seen = run_against(handler, fetch_twice)
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.OK]
    assert [r.body for r in results] == [b"<p>until the end</p>"] * 2
    assert seen.connections == 2


def test_chunked_responses_keep_the_connection_for_the_next_request() -> None:
    handler = answering(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", b"6\r\n world\r\n0\r\n\r\n"
    )
    results, seen = run_against(handler, fetch_twice)
    assert [r.body for r in results] == [b"hello world"] * 2
    assert seen.connections == 1
    assert [request.split(b" ")[1] for request in seen.requests] == [b"/one", b"/two"]


def test_an_interim_response_is_skipped_for_the_final_one() -> None:
    handler = answering(
        b"HTTP/1.1 100 Continue\r\nX-Interim: yes\r\n\r\n",
        b"HTTP/1.1 201 Created\r\nContent-Length: 4\r\nX-Final: yes\r\n\r\ndone",
    )
    results, seen = run_against(handler, fetch_twice)
    assert [(r.status, r.reason, r.body) for r in results] == [(201, "Created", b"done")] * 2
    assert results[0].headers == [("Content-Length", "4"), ("X-Final", "yes")]
    assert seen.connections == 1


def test_a_chunked_body_cut_by_the_server_closing_is_a_bad_response_kept_as_far_as_it_came() -> None:
    handler = answering(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nwo", keep_alive=False)

    async def once(fetcher: Fetcher, seen: Scripted) -> list[FetchResult]:
        return [await fetcher.fetch(seen.url())]

    [result], _ = run_against(handler, once)
    assert result.outcome is Outcome.BAD_RESPONSE
    assert result.truncated == "disconnect"
    assert result.body.startswith(b"hello")
    assert "closed before the end of the body" in result.error


def test_an_idle_connection_is_closed_after_the_keepalive_time() -> None:
    async def with_a_pause(fetcher: Fetcher, seen: Scripted) -> list[FetchResult]:
        first = await fetcher.fetch(seen.url("/one"))
        await asyncio.sleep(0.1)
        second = await fetcher.fetch(seen.url("/two"))  # within the keep-alive time: the same connection
        await asyncio.sleep(0.6)
        closed_while_idle = seen.closed_by_client
        third = await fetcher.fetch(seen.url("/three"))
        return [first, second, third] if closed_while_idle == 1 else []

    results, seen = run_against(answering(OK), with_a_pause, keepalive_timeout=0.3)
    assert [r.outcome for r in results] == [Outcome.OK] * 3, "the idle connection was not closed by the client"
    assert seen.connections == 2


def test_the_total_connection_limit_holds_across_hosts() -> None:
    async def many(fetcher: Fetcher, seen: Scripted) -> list[FetchResult]:
        # five origins (host names), one server: only the total limit applies
        return list(await asyncio.gather(*(fetcher.fetch(f"http://{name}:{seen.port}/") for name in NAMES)))

    resolver = offline_resolver(dict.fromkeys(NAMES, "127.0.0.1"))
    results, seen = run_against(
        answering(OK, delay=0.1), many, max_connections=2, keepalive_timeout=0, resolver=resolver
    )
    assert [r.outcome for r in results] == [Outcome.OK] * 5
    assert seen.max_active == 2


def test_a_header_that_would_split_the_request_is_refused_before_sending() -> None:
    async def injected(fetcher: Fetcher, seen: Scripted) -> list[FetchResult]:
        bad = await fetcher.fetch(seen.url(), extra_headers=[("X-Note", "a\r\nGET /other HTTP/1.1")])
        good = await fetcher.fetch(seen.url(), extra_headers=[("X-Note", "plain")])
        return [bad, good]

    (bad, good), seen = run_against(answering(OK), injected)
    assert bad.outcome is Outcome.NETWORK_ERROR
    assert "not one line" in bad.error
    assert good.outcome is Outcome.OK
    assert len(seen.requests) == 1 and b"X-Note: plain\r\n" in seen.requests[0]


def test_a_cancelled_wait_for_a_connection_gives_its_turn_to_the_next() -> None:
    async def with_a_cancel(fetcher: Fetcher, seen: Scripted) -> list[FetchResult]:
        first = asyncio.create_task(fetcher.fetch(seen.url("/1")))
        await asyncio.sleep(0.05)
        waiting = asyncio.create_task(fetcher.fetch(seen.url("/2")))  # waits: one connection per host
        third = asyncio.create_task(fetcher.fetch(seen.url("/3")))
        await asyncio.sleep(0.05)
        waiting.cancel()
        return [await first, await third]

    results, seen = run_against(answering(OK, delay=0.2), with_a_cancel, max_conn_per_host=1)
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.OK]
    assert seen.max_active == 1
    assert [request.split(b" ")[1] for request in seen.requests] == [b"/1", b"/3"]


def test_a_server_ending_lines_with_a_bare_lf_is_understood_as_aiohttp_did() -> None:
    handler = answering(b"HTTP/1.1 200 OK\nContent-Type: text/html\nContent-Length: 4\n\nbare")
    results, seen = run_against(handler, fetch_twice)
    assert [(r.outcome, r.body) for r in results] == [(Outcome.OK, b"bare")] * 2
    assert results[0].header("content-type") == "text/html"
    assert seen.connections == 1


def test_beyond_the_idle_limit_the_connection_idle_the_longest_is_closed() -> None:
    async def three_hosts(fetcher: Fetcher, seen: Scripted) -> list[FetchResult]:
        first = await fetcher.fetch(f"http://{NAMES[0]}:{seen.port}/")
        second = await fetcher.fetch(f"http://{NAMES[1]}:{seen.port}/")
        await asyncio.sleep(0.1)
        closed_after_two = seen.closed_by_client  # host 0's connection made way for host 1's
        again = await fetcher.fetch(f"http://{NAMES[1]}:{seen.port}/")  # still kept: no new connection
        return [first, second, again] if closed_after_two == 1 else []

    resolver = offline_resolver(dict.fromkeys(NAMES, "127.0.0.1"))
    results, seen = run_against(answering(OK), three_hosts, max_idle_connections=1, resolver=resolver)
    assert [r.outcome for r in results] == [Outcome.OK] * 3, "host 0's idle connection was not closed"
    assert seen.connections == 2


def test_the_idle_limit_follows_the_file_descriptor_limit_by_default() -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert make_fetcher(max_idle_connections=7)._max_idle(100) == 7
    expected = max(100, (1 << 20 if soft == resource.RLIM_INFINITY else soft) // 2)
    assert make_fetcher()._max_idle(100) == expected
