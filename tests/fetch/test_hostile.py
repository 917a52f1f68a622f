"""The hostile-server suite: one misbehaviour per path, each ending in the expected outcome, within
the timeouts the test set, while fetches from another host carry on undisturbed."""

from __future__ import annotations

import asyncio

import pytest

from crawlspace.fetch import Outcome
from tests.fetch.conftest import (
    MAX_BODY,
    READ_TIMEOUT,
    TOTAL_TIMEOUT,
    Alongside,
    assert_other_crawl_went_on,
    fetch_alongside,
    make_fetcher,
)
from tests.fetch.hostile_server import HostileServer

QUICK = 1.5  # seconds: misbehaviours that need no timeout to detect must be detected at once


def run(hostile: HostileServer, good: HostileServer, path: str, **fetcher_options: object) -> Alongside:
    async def go() -> Alongside:
        async with make_fetcher(**fetcher_options) as fetcher:
            return await fetch_alongside(fetcher, hostile.url(path), good)

    return asyncio.run(go())


def test_slowloris_is_cut_by_the_total_timeout(hostile: HostileServer, good: HostileServer) -> None:
    result = run(hostile, good, "/slowloris")
    assert result.result.outcome is Outcome.TIMEOUT
    # one byte a second never trips the read timeout; the total timeout ends it
    assert "total timeout" in result.result.error
    assert TOTAL_TIMEOUT - 0.2 <= result.elapsed <= TOTAL_TIMEOUT + 1.0
    assert_other_crawl_went_on(result)


def test_accept_and_never_answer_is_cut_by_the_read_timeout(hostile: HostileServer, good: HostileServer) -> None:
    result = run(hostile, good, "/silent")
    assert result.result.outcome is Outcome.TIMEOUT
    assert result.result.status == 0
    assert "reading data" in result.result.error
    assert READ_TIMEOUT - 0.2 <= result.elapsed <= READ_TIMEOUT + 1.0
    assert_other_crawl_went_on(result)


def test_never_ending_body_is_truncated_and_marked(hostile: HostileServer, good: HostileServer) -> None:
    result = run(hostile, good, "/endless")
    fetched = result.result
    assert fetched.outcome is Outcome.TOO_LARGE
    assert fetched.status == 200
    assert fetched.truncated == "length"
    assert len(fetched.body) == MAX_BODY
    assert fetched.content().startswith(b"<p>more more")
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)


def test_100_mb_page_is_truncated_at_the_body_limit(hostile: HostileServer, good: HostileServer) -> None:
    result = run(hostile, good, "/huge")
    fetched = result.result
    assert fetched.outcome is Outcome.TOO_LARGE
    assert fetched.truncated == "length"
    assert len(fetched.body) == MAX_BODY
    assert fetched.header("content-length") == str(100 * 1024 * 1024)
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
def test_compression_bombs_are_stopped_while_streaming(
    hostile: HostileServer, good: HostileServer, encoding: str
) -> None:
    result = run(hostile, good, f"/{encoding}-bomb")
    fetched = result.result
    assert fetched.outcome is Outcome.TOO_LARGE
    assert fetched.truncated == "length"
    assert "exceeds" in fetched.error
    assert fetched.decoded is not None and len(fetched.decoded) <= MAX_BODY
    # the bomb would decode to 1 GiB; reading stopped after a few compressed chunks
    assert len(fetched.body) < 512 * 1024
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)


def test_compression_ratio_cap_stops_a_bomb_below_the_size_cap(hostile: HostileServer, good: HostileServer) -> None:
    from crawlspace.fetch.fetcher import FetchLimits

    limits = FetchLimits(max_body_bytes=MAX_BODY, max_decoded_bytes=64 * MAX_BODY, max_compression_ratio=50)
    result = run(hostile, good, "/gzip-bomb", limits=limits)
    assert result.result.outcome is Outcome.TOO_LARGE
    assert "ratio" in result.result.error
    decoded = result.result.decoded
    assert decoded is not None
    # bounded by the ratio times what was read (not by the 64 MiB size cap, which was never reached)
    assert len(decoded) <= max(1 << 20, 50 * len(result.result.body))
    assert len(decoded) < 64 * MAX_BODY
    assert_other_crawl_went_on(result)


def test_content_length_shorter_than_the_body(hostile: HostileServer, good: HostileServer) -> None:
    async def go() -> tuple[Alongside, Outcome]:
        async with make_fetcher() as fetcher:
            first = await fetch_alongside(fetcher, hostile.url("/short-length"), good)
            after = await fetcher.fetch(hostile.url("/ok"))  # the junk must not poison the next request
            return first, after.outcome

    result, next_outcome = asyncio.run(go())
    assert result.result.outcome is Outcome.BAD_RESPONSE
    assert next_outcome is Outcome.OK
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)


def test_junk_after_a_response_does_not_poison_the_pooled_connection(hostile: HostileServer) -> None:
    async def go() -> list[Outcome]:
        async with make_fetcher() as fetcher:
            outcomes = [(await fetcher.fetch(hostile.url("/late-junk"))).outcome]
            await asyncio.sleep(0.3)  # the junk arrives while the connection sits in the pool
            outcomes += [(await fetcher.fetch(hostile.url("/ok"))).outcome for _ in range(2)]
            return outcomes

    assert asyncio.run(go()) == [Outcome.OK, Outcome.OK, Outcome.OK]


def test_content_length_longer_than_the_body(hostile: HostileServer, good: HostileServer) -> None:
    result = run(hostile, good, "/long-length")
    fetched = result.result
    assert fetched.outcome is Outcome.BAD_RESPONSE
    assert fetched.status == 200
    assert fetched.truncated == "disconnect"
    assert fetched.body == b"z" * 100
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)


def test_garbage_status_line(hostile: HostileServer, good: HostileServer) -> None:
    result = run(hostile, good, "/garbage-status")
    assert result.result.outcome is Outcome.BAD_RESPONSE
    assert result.result.status == 0
    assert "status" in result.result.error.lower()
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)


def test_reset_mid_body(hostile: HostileServer, good: HostileServer) -> None:
    result = run(hostile, good, "/reset")
    fetched = result.result
    assert fetched.outcome is Outcome.CONNECTION_RESET
    assert fetched.status == 200
    assert fetched.truncated == "disconnect"
    assert 0 < len(fetched.body) < 1_000_000
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)


def test_close_without_answering(hostile: HostileServer, good: HostileServer) -> None:
    result = run(hostile, good, "/hang-up")
    assert result.result.outcome is Outcome.CONNECTION_RESET
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)


def test_ten_thousand_headers(hostile: HostileServer, good: HostileServer) -> None:
    result = run(hostile, good, "/many-headers")
    assert result.result.outcome is Outcome.BAD_RESPONSE
    assert "headers" in result.result.error.lower()
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)


def test_one_enormous_header(hostile: HostileServer, good: HostileServer) -> None:
    result = run(hostile, good, "/huge-header")
    assert result.result.outcome is Outcome.BAD_RESPONSE
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)


def test_redirect_loop_is_returned_not_followed(hostile: HostileServer, good: HostileServer) -> None:
    before = hostile.hits["/loop/b"]
    result = run(hostile, good, "/loop/a")
    assert result.result.outcome is Outcome.REDIRECT
    assert result.result.header("location") == "/loop/b"
    assert hostile.hits["/loop/b"] == before  # not followed inline
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)


def test_redirect_chain_hop_is_one_fetch(hostile: HostileServer, good: HostileServer) -> None:
    result = run(hostile, good, "/chain/0")
    assert result.result.outcome is Outcome.REDIRECT
    assert result.result.header("location") == "/chain/1"
    assert hostile.hits["/chain/1"] == 0
    assert_other_crawl_went_on(result)


@pytest.mark.parametrize("path", ["/bad-utf8", "/lying-charset"])
def test_undecodable_text_is_fetched_as_bytes(hostile: HostileServer, good: HostileServer, path: str) -> None:
    result = run(hostile, good, path)
    fetched = result.result
    assert fetched.outcome is Outcome.OK
    assert fetched.charset == "utf-8"  # what the server claimed; decoding is the parser's business
    assert b"<a href=" in fetched.content()
    assert fetched.content() == fetched.body  # bytes as sent, nothing replaced
    assert result.elapsed < QUICK
    assert_other_crawl_went_on(result)
