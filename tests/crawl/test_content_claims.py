"""The partitioned exact-duplicate test between two crawl processes' links: the partition owning a body
fingerprint names the same first URL to everyone, and, with near-duplicates not stored, holds its
answer to copies until the first URL's partition has said whether that page was stored."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from crawlspace.distributed.channel import Channel
from crawlspace.distributed.socketmesh import SocketMesh
from crawlspace.seen import ContentSeen

FINGERPRINT = 2**40  # even: partition 0 of 2 owns it
A, C, D, E = (f"http://site{index}.test/page" for index in range(4))


class QuietEngine:
    """An Inbox (distributed.protocols) with a content set and nothing else: no URLs flow here."""

    def __init__(self, directory: Path) -> None:
        self.content = ContentSeen(directory)

    def claim_first(self, body_fingerprint: int, url: str, fetched_at: float) -> tuple[str, float]:
        return self.content.claim_first(body_fingerprint, url, fetched_at)

    def release_first(self, body_fingerprint: int, url: str) -> None:
        self.content.release_first(body_fingerprint, url)

    def receive_urls(self, entries: list[Any], *, forwarded: bool = False) -> bool:
        raise AssertionError("no URLs in this test")

    def batch_acknowledged(self, peer: int, number: int) -> None:
        raise AssertionError("no URLs in this test")

    def report(self) -> dict[str, Any]:
        return {}

    def stop(self, reason: str) -> None:
        raise AssertionError(f"stopped: {reason}")


async def linked(tmp_path: Path, store_near: bool) -> tuple[list[SocketMesh], list[Channel]]:
    """Two started meshes, peers of each other; the coordinator's ends of their control channels."""
    ends = socket.socketpair()
    controls = [socket.socketpair() for _ in range(2)]
    links = [SocketMesh(k, 2, {1 - k: ends[k]}, controls[k][0], hold_until_settled=not store_near) for k in range(2)]
    coordinator = [await Channel.over(theirs) for _, theirs in controls]
    for channel in coordinator:
        channel.send(["go"])
    for index, link in enumerate(links):
        assert await link.ready()
        await link.start(QuietEngine(tmp_path / str(index)))
    return links, coordinator


async def pending(claim: asyncio.Task[tuple[str, float] | None]) -> bool:
    await asyncio.sleep(0.05)
    return not claim.done()


def test_the_owner_names_one_first_url_to_every_partition(tmp_path: Path) -> None:
    async def claims() -> list[tuple[str, float] | None]:
        links, _ = await linked(tmp_path, store_near=True)
        answers = [
            await links[1].claim_first(FINGERPRINT, A, 1.0),
            await links[0].claim_first(FINGERPRINT, C, 2.0),
            await links[1].claim_first(FINGERPRINT, D, 3.0),
            await links[1].claim_first(FINGERPRINT, A, 4.0),  # the first URL fetched again
        ]
        for link in links:
            await link.close()
        return answers

    assert asyncio.run(claims()) == [(A, 1.0), (A, 1.0), (A, 1.0), (A, 1.0)]


@pytest.mark.parametrize("owner_side", [0, 1])
def test_copies_wait_until_the_first_url_is_settled_when_near_duplicates_are_not_stored(
    tmp_path: Path, owner_side: int
) -> None:
    """A's page turns out a near-duplicate that is not stored: the copy waiting for it becomes the first
    URL instead (never a revisit of a page that was not written), and later copies wait for that one."""

    async def claims() -> list[tuple[str, float] | None]:
        links, _ = await linked(tmp_path, store_near=False)
        first_side, copy_side = 1 - owner_side, owner_side  # the first URL on either side of the owner
        assert await links[first_side].claim_first(FINGERPRINT, A, 1.0) == (A, 1.0)
        copy = asyncio.create_task(links[copy_side].claim_first(FINGERPRINT, C, 2.0))
        assert await pending(copy)
        later = asyncio.create_task(links[first_side].claim_first(FINGERPRINT, D, 3.0))
        assert await pending(later)
        links[first_side].settle(FINGERPRINT, A, stored=False)
        answers = [await asyncio.wait_for(copy, 5)]
        assert await pending(later)
        links[copy_side].settle(FINGERPRINT, C, stored=True)
        answers.append(await asyncio.wait_for(later, 5))
        answers.append(await links[0].claim_first(FINGERPRINT, E, 4.0))  # settled: answered at once
        for link in links:
            await link.close()
        return answers

    assert asyncio.run(claims()) == [(C, 2.0), (C, 2.0), (C, 2.0)]
