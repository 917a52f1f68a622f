"""Waiting for the owners' answers to one page's near-duplicate questions: the part every transport shares
(the socket mesh, Redis streams), so that "an owner that did not answer in time is left out" means the
same thing on each."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from crawlspace.distributed.nearclaims import NearMatch


async def gather_near(
    waiting: Mapping[int, asyncio.Future[NearMatch | None]], timeout: float
) -> tuple[dict[int, NearMatch | None], list[int]]:
    """The answers that came within `timeout` (owner -> best match or None), and the owners that were silent."""
    if waiting:
        await asyncio.wait(list(waiting.values()), timeout=timeout)
    answers: dict[int, NearMatch | None] = {}
    silent: list[int] = []
    for owner, future in waiting.items():
        if future.done() and not future.cancelled():
            answers[owner] = future.result()
        else:
            silent.append(owner)
    return answers, silent
