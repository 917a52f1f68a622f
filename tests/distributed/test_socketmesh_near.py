"""Near-duplicate questions over the socketpair mesh: one `nq` per owner of a page's band keys, its `na`
answer; an owner that never answers, or whose channel closed, is absent from the answers (the engine
counts it and takes the page as new there) after at most the timeout; a malformed question is dropped."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from pathlib import Path
from typing import Any

from crawlspace.distributed.channel import Channel
from crawlspace.distributed.nearclaims import NearMatch, NearQuestion, answer_near, near_questions
from crawlspace.distributed.socketmesh import SocketMesh
from crawlspace.seen import ContentSeen
from tests.distributed.test_nearclaims import ROWS, SHINGLER, THRESHOLD, near_copy, text

ORIGINAL = text(70)


class NearOwner:
    """An Inbox (distributed.protocols) answering near-duplicate questions from a content set."""

    def __init__(self, directory: Path) -> None:
        self.content = ContentSeen(directory, near_threshold=THRESHOLD)
        self.questions: list[NearQuestion] = []

    def answer_near(self, question: NearQuestion) -> NearMatch | None:
        self.questions.append(question)
        return answer_near(self.content, question, THRESHOLD)

    def claim_first(self, body_fingerprint: int, url: str, fetched_at: float) -> tuple[str, float]:
        raise AssertionError("no exact duplicates in this test")

    def release_first(self, body_fingerprint: int, url: str) -> None:
        raise AssertionError("no exact duplicates in this test")

    def receive_urls(self, entries: list[Any], *, forwarded: bool = False) -> bool:
        raise AssertionError("no URLs in this test")

    def batch_acknowledged(self, peer: int, number: int) -> None:
        raise AssertionError("no URLs in this test")

    def stop(self, reason: str) -> None:
        raise AssertionError(f"stopped: {reason}")


async def started(mesh: SocketMesh, control: socket.socket, inbox: NearOwner) -> None:
    coordinator = await Channel.over(control)
    coordinator.send(["go"])
    assert await mesh.ready()
    await mesh.start(inbox)


def questions(url: str, words: str, partitions: int = 2) -> dict[int, NearQuestion]:
    signature = SHINGLER.signature(words)
    assert signature is not None
    now = time.time()
    return near_questions(url, now, now, signature, ROWS, partitions)


def test_each_owner_answers_its_share_and_a_near_copy_on_either_side_is_found(tmp_path: Path) -> None:
    async def run() -> list[dict[int, NearMatch | None]]:
        ends, controls = socket.socketpair(), [socket.socketpair() for _ in range(2)]
        meshes = [SocketMesh(k, 2, {1 - k: ends[k]}, controls[k][0]) for k in range(2)]
        owners = [NearOwner(tmp_path / str(k)) for k in range(2)]
        for k in range(2):
            await started(meshes[k], controls[k][1], owners[k])
        asked = questions("http://a.test/original", ORIGINAL)
        assert set(asked) == {0, 1}  # this page's band keys fall on both partitions
        answers = [await meshes[0].ask_near(asked)]
        answers.append(await meshes[1].ask_near(questions("http://b.test/copy", near_copy(ORIGINAL, 2))))
        assert [len(owner.questions) for owner in owners] == [2, 2]  # one question per owner per page
        for mesh in meshes:
            await mesh.close()
        return answers

    first, second = asyncio.run(run())
    assert first == {0: None, 1: None}  # answered, nothing similar: unlike silence
    assert set(second) == {0, 1}
    assert all(match is not None and match.url == "http://a.test/original" for match in second.values())


def test_an_owner_that_never_answers_or_is_gone_is_missing_from_the_answers_after_the_timeout(tmp_path: Path) -> None:
    async def run() -> tuple[dict[int, NearMatch | None], float, dict[int, NearMatch | None], float, list[Any]]:
        ends, control = socket.socketpair(), socket.socketpair()
        mesh = SocketMesh(0, 2, {1: ends[0]}, control[0], query_timeout=0.3)
        await started(mesh, control[1], NearOwner(tmp_path / "0"))
        silent = await Channel.over(ends[1])  # partition 1 reads its questions and never answers
        asked = questions("http://a.test/original", ORIGINAL)
        began = time.monotonic()
        silence = await mesh.ask_near(asked)
        waited = time.monotonic() - began
        heard = await silent.receive()
        silent.close()  # partition 1 is gone now: asked at once, nothing waited for
        await asyncio.sleep(0.05)
        began = time.monotonic()
        gone = await mesh.ask_near(questions("http://a.test/other", text(71)))
        waited_gone = time.monotonic() - began
        await mesh.close()
        return silence, waited, gone, waited_gone, heard

    silence, waited, gone, waited_gone, heard = asyncio.run(run())
    assert set(silence) == {0} and 0.3 <= waited < 2.0  # the timeout, not the crawl, decided
    assert heard[0] == "nq" and heard[3] == "http://a.test/original"
    assert 1 not in gone and waited_gone < 0.3


def test_a_malformed_question_is_dropped_and_the_owner_keeps_answering(tmp_path: Path) -> None:
    async def run() -> tuple[list[Any], list[Any]]:
        ends, control = socket.socketpair(), socket.socketpair()
        mesh = SocketMesh(1, 2, {0: ends[1]}, control[0])
        owner = NearOwner(tmp_path / "1")
        await started(mesh, control[1], owner)
        asker = await Channel.over(ends[0])
        asker.send(["nq", 0, 1, "http://a.test/", 1.0, 1.0, b"\x01", [0, 5]])  # an odd-length signature
        asker.send(["nq", 0, 2, "http://a.test/", 1.0, 1.0, "not bytes", [0, 5]])
        asker.send(["nq", 0, 3, "http://a.test/", 1.0, 1.0, b"\x01\x00", [0]])  # a band without its key
        asker.send(["nq", "zero", 5])  # no question at all
        asker.send(["nq", 7, 6, "http://a.test/", 1.0, 1.0, b"\x01\x00", [0, 5]])  # from no partition it knows
        asker.send(["na", [1], "garbage"])  # an answer to nothing, malformed
        good = questions("http://a.test/", ORIGINAL)[1]
        bands = [value for pair in good.bands for value in pair]
        asker.send(["nq", 0, 4, good.url, good.fetched_at, good.asked_at, good.signature, bands])
        answer = await asyncio.wait_for(asker.receive(), 5)
        asker.close()
        await mesh.close()
        return answer, [q.url for q in owner.questions]

    answer, answered = asyncio.run(run())
    assert answer == ["na", 4, None]  # the malformed ones went unanswered, the listener lived on
    assert answered == ["http://a.test/"]


def test_stop_asking_ends_the_open_questions_at_once_and_asks_no_more(tmp_path: Path) -> None:
    """At a crawl's stop a page in flight must not wait out the timeout for owners that may have
    stopped: past the shutdown grace its task is cancelled."""

    async def run() -> tuple[dict[int, NearMatch | None], float, dict[int, NearMatch | None], int]:
        ends, control = socket.socketpair(), socket.socketpair()
        mesh = SocketMesh(0, 2, {1: ends[0]}, control[0], query_timeout=30.0)
        await started(mesh, control[1], NearOwner(tmp_path / "0"))
        silent = await Channel.over(ends[1])  # partition 1 reads its questions and never answers
        began = time.monotonic()
        asking = asyncio.create_task(mesh.ask_near(questions("http://a.test/original", ORIGINAL)))
        await silent.receive()  # the question is out
        mesh.stop_asking()
        open_answers = await asking
        waited = time.monotonic() - began
        again = questions("http://a.test/again", ORIGINAL)
        assert 1 in again  # the same band keys: partition 1 would be asked
        later = await mesh.ask_near(again)
        asked_later = 0
        with contextlib.suppress(TimeoutError):
            while True:
                await asyncio.wait_for(silent.receive(), timeout=0.2)
                asked_later += 1
        silent.close()
        await mesh.close()
        return open_answers, waited, later, asked_later

    open_answers, waited, later, asked_later = asyncio.run(run())
    assert 1 not in open_answers and waited < 5.0  # unanswered, well before the 30 s timeout
    assert 1 not in later and asked_later == 0
