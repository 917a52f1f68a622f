"""distributed.resp's pipelined link against a redis-server of the test's own: replies in order, error
replies raised without losing step, the password, a lost server failing what waits and a restarted one
reached again; and the command packing checked against hiredis's own reader."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Coroutine
from typing import Any

import hiredis
import pytest
import redis.asyncio
import redis.exceptions
import uvloop
from hypothesis import given
from hypothesis import strategies as st

from crawlspace.distributed.resp import RespLink, pack
from tests.distributed.redis_server import RedisServer
from tests.distributed.test_cluster import tls_redis

__all__ = ["tls_redis"]  # the fixture: redis-server on TLS only, its certificate from a trustme CA

Run = Callable[[Coroutine[Any, Any, None]], None]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Run:
    """Each test on both event loops: the crawl runs on uvloop, whose transports differ from asyncio's."""
    factory = uvloop.new_event_loop if request.param == "uvloop" else None

    def running(coroutine: Coroutine[Any, Any, None]) -> None:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(coroutine)

    return running


@given(
    st.lists(st.one_of(st.binary(max_size=300), st.text(max_size=100), st.integers(-(2**63), 2**63 - 1)), min_size=1)
)
def test_a_packed_command_reads_back_as_its_arguments(arguments: list[bytes | str | int]) -> None:
    reader = hiredis.Reader()
    reader.feed(pack(arguments))
    expected = [a.encode() if isinstance(a, str) else b"%d" % a if isinstance(a, int) else a for a in arguments]
    assert reader.gets() == expected
    assert reader.gets() is False  # nothing left over


def test_replies_come_back_in_order_and_an_error_keeps_the_link_in_step(redis_server: RedisServer, run: Run) -> None:
    async def scenario() -> None:
        link = RespLink.from_url(redis_server.url)
        replies = await link.execute([("DEL", "s"), ("XADD", "s", "*", b"m", b"one"), ("XADD", "s", "*", b"m", b"two")])
        assert replies[0] in (0, 1) and all(isinstance(r, bytes) and b"-" in r for r in replies[1:])
        await link.execute([("XGROUP", "CREATE", "s", "g", "0")])
        read = ["XREADGROUP", "GROUP", "g", "c", "COUNT", 10, "STREAMS", "s", ">"]
        (reply,) = await link.execute([read])
        assert reply[0][0] == b"s" and [fields for _, fields in reply[0][1]] == [[b"m", b"one"], [b"m", b"two"]]
        assert (await link.execute([read]))[0] is None  # nothing new: nil
        with pytest.raises(redis.exceptions.ResponseError, match="BUSYGROUP"):
            await link.execute([("PING",), ("XGROUP", "CREATE", "s", "g", "0"), ("PING",)])
        assert await link.execute([("ECHO", "after"), ("XLEN", "s")]) == [b"after", 2]  # still in step
        link.close()

    run(scenario())


def test_a_wrong_password_is_an_authentication_error(redis_server: RedisServer, run: Run) -> None:
    async def scenario() -> None:
        link = RespLink.from_url(redis_server.url.replace(redis_server.password, "not-the-password"))
        with pytest.raises(redis.exceptions.AuthenticationError):
            await link.execute([("PING",)])

    run(scenario())


def test_the_pool_of_a_client_gives_its_server_and_database(redis_server: RedisServer, run: Run) -> None:
    async def scenario() -> None:
        client = redis.asyncio.Redis.from_url(redis_server.url.replace("/0", "/3"))
        await client.set("where", b"db3")
        link = RespLink(client.connection_pool)
        assert await link.execute([("GET", "where")]) == [b"db3"]
        link.close()
        await client.aclose()

    run(scenario())


async def blocked_read(link: RespLink, stream: str) -> asyncio.Future[list[Any]]:
    """An XREADGROUP on an empty stream that blocks for 30 s, sent and waiting."""
    await link.execute([("XGROUP", "CREATE", stream, "g", "$", "MKSTREAM")])
    blocked = asyncio.ensure_future(
        link.execute([("XREADGROUP", "GROUP", "g", "c", "BLOCK", 30_000, "STREAMS", stream, ">")])
    )
    await asyncio.sleep(0.2)
    assert not blocked.done()
    return blocked


def test_a_killed_server_fails_what_waits_and_a_restarted_one_is_reached(redis_server: RedisServer, run: Run) -> None:
    async def scenario() -> None:
        link = RespLink.from_url(redis_server.url)
        blocked = await blocked_read(link, "k")
        redis_server.kill()
        with pytest.raises(redis.exceptions.ConnectionError):
            await asyncio.wait_for(blocked, 5)
        with pytest.raises((redis.exceptions.ConnectionError, OSError)):  # refused while it is down
            await link.execute([("PING",)])
        redis_server.start()
        assert await link.execute([("PING",)]) == [b"PONG"]
        link.close()

    run(scenario())


def test_close_fails_a_blocked_read_at_once(redis_server: RedisServer, run: Run) -> None:
    async def scenario() -> None:
        link = RespLink.from_url(redis_server.url)
        blocked = await blocked_read(link, "b")
        started = time.monotonic()
        link.close()
        with pytest.raises(redis.exceptions.ConnectionError):
            await blocked
        assert time.monotonic() - started < 1.0
        assert await link.execute([("PING",)]) == [b"PONG"]  # a new connection on the next use
        link.close()

    run(scenario())


def test_tasks_sharing_a_link_get_their_own_replies_from_one_connection(redis_server: RedisServer, run: Run) -> None:
    async def scenario() -> None:
        link = RespLink.from_url(redis_server.url)  # not yet connected: every task below wants it at once

        async def echo(word: str) -> list[object]:
            return await link.execute([("ECHO", word), ("CLIENT", "ID")])

        replies = await asyncio.gather(*(echo(f"task-{k}") for k in range(20)))
        assert [reply[0] for reply in replies] == [f"task-{k}".encode() for k in range(20)]
        assert len({reply[1] for reply in replies}) == 1  # one connection served them all
        link.close()

    run(scenario())


def test_rediss_urls_are_tls_and_verify_the_server(tls_redis: RedisServer, run: Run) -> None:
    async def scenario() -> None:
        link = RespLink.from_url(tls_redis.url)  # ?ssl_ca_certs=: the test's CA
        assert await link.execute([("PING",), ("ECHO", "over tls")]) == [b"PONG", b"over tls"]
        link.close()
        unverified = RespLink.from_url(tls_redis.url.split("?")[0])  # the system's CAs do not know it
        with pytest.raises(ssl.SSLCertVerificationError):
            await unverified.execute([("PING",)])

    run(scenario())
