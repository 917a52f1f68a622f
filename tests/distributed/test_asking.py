"""Waiting for the owners' near-duplicate answers (distributed.asking.gather_near): what came in time, who was
silent, and that cancelling the asker is not mistaken for a silent owner."""

from __future__ import annotations

import asyncio
import time

import pytest

from crawlspace.distributed.asking import gather_near
from crawlspace.distributed.nearclaims import NearMatch

MATCH = NearMatch("http://a.test/", 1.0, 0.95)


def test_answers_in_time_are_kept_and_silent_owners_are_left_out_once_the_time_is_up() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        quick, none, slow = loop.create_future(), loop.create_future(), loop.create_future()
        loop.call_later(0.01, quick.set_result, MATCH)
        loop.call_soon(none.set_result, None)
        started = time.monotonic()
        answers, silent = await gather_near({0: quick, 1: none, 2: slow}, 0.2)
        assert answers == {0: MATCH, 1: None} and silent == [2]
        assert 0.15 < time.monotonic() - started < 2.0
        assert slow.done()  # a late answer finds the question given up

    asyncio.run(scenario())


def test_an_answer_cancelled_by_its_transport_is_a_silent_owner_without_waiting_for_the_timeout() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        gone, answered = loop.create_future(), loop.create_future()
        loop.call_soon(gone.cancel)  # its peer went away
        loop.call_later(0.01, answered.set_result, MATCH)
        started = time.monotonic()
        assert await gather_near({0: gone, 1: answered}, 30.0) == ({1: MATCH}, [0])
        assert time.monotonic() - started < 5.0

    asyncio.run(scenario())


def test_cancelling_the_asker_is_not_taken_for_a_silent_owner() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        never = loop.create_future()
        asking = asyncio.create_task(gather_near({0: never}, 30.0))
        await asyncio.sleep(0.01)
        asking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asking

    asyncio.run(scenario())
