"""Outdated notices across partitions (distributed.outdated): a refreshed page's old body fingerprint and LSH
entries leave the other partitions' content sets, only while they still name that version; notices are
durable with the forgetting they tell of, sent until acknowledged, applied once or twice alike; both
transports carry them and drop malformed ones."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio

from crawlspace.crawl.partition import PartitionInbox
from crawlspace.crawl.telemetry import CrawlStats
from crawlspace.distributed import wire
from crawlspace.distributed.assignment import content_owner
from crawlspace.distributed.channel import Channel
from crawlspace.distributed.nearclaims import answer_near, near_questions
from crawlspace.distributed.outdated import OutdatedDelivery, OutdatedNoticeError, checked_notice
from crawlspace.distributed.redisstreams import RedisPeers
from crawlspace.distributed.socketmesh import SocketMesh
from crawlspace.seen import ContentKind, ContentSeen
from crawlspace.seen.content import OutdatedNotice
from crawlspace.urls.fingerprint import content_fingerprint
from tests.distributed.memory_peers import MemoryNetwork
from tests.distributed.redis_server import RedisServer
from tests.distributed.test_redis_peers import KEYS, FakeInbox, until
from tests.killing import kill_at_first_line
from tests.seen.test_content import changed, text_of

PAGE = "http://a.test/page"


class Partitions:
    """Two content sets as the partitions of a crawl use them: the fingerprint's owner answers the
    first URL (`claim_first`), the owners of a page's band keys index it (`answer_near`); notices
    are carried by hand, so a test can lose, delay and repeat them."""

    def __init__(self, root: Path) -> None:
        self.sets = [ContentSeen(root / str(k)) for k in range(2)]
        for k, content in enumerate(self.sets):
            content.outdated_peers = (1 - k,)

    def fetch(self, partition: int, url: str, text: str, at: float) -> tuple[ContentKind, str | None]:
        """One fetch by `partition` as the engine and recorder do it: the claim, the exact test, the
        near questions to the owners and the verdict from their answers."""
        fingerprint = content_fingerprint(text.encode())
        owner = self.sets[content_owner(fingerprint, 2)]
        first = owner.claim_first(fingerprint, url, at)
        content = self.sets[partition]
        verdict = content.check(url, fingerprint, at, first=first)
        if verdict.kind is not ContentKind.NEW:
            return verdict.kind, verdict.of_url
        signature = content.shingler.signature(text)
        assert signature is not None
        questions = near_questions(url, at, at, signature, content.rows, 2)
        answers = [answer_near(self.sets[k], question, content.near_threshold) for k, question in questions.items()]
        best = max((a for a in answers if a is not None), key=lambda a: a.similarity, default=None)
        match = (best.url, best.fetched_at, best.similarity) if best and best.similarity >= 0.9 else None
        verdict = content.record_near(url, match)
        return verdict.kind, verdict.of_url

    def waiting(self, partition: int) -> list[tuple[int, OutdatedNotice]]:
        return list(self.sets[partition].outdated_waiting())

    def deliver(self, partition: int) -> int:
        """Every notice `partition` holds, to its peer; the peer's removals; acknowledged and deleted."""
        removed = 0
        for peer, notice in self.waiting(partition):
            removed += self.sets[peer].forget_outdated(notice)
            self.sets[partition].outdated_delivered(peer, notice.url, notice.replaced_at)
        return removed

    def close(self) -> None:
        for content in self.sets:
            content.close()


@pytest.fixture
def partitions(tmp_path: Path) -> Any:
    crawl = Partitions(tmp_path)
    yield crawl
    crawl.close()


def owned_by(partition: int, seed: int) -> str:
    """A text whose body fingerprint the given partition owns."""
    while content_fingerprint(text_of(seed).encode()) % 2 != partition:
        seed += 1
    return text_of(seed)


def test_old_content_at_another_url_is_new_once_the_notice_arrived_and_a_duplicate_before(partitions: Any) -> None:
    old = owned_by(1, 100)  # its first URL lives with partition 1, the page with partition 0
    new = text_of(200)
    assert partitions.fetch(0, PAGE, old, at=10.0) == (ContentKind.NEW, None)
    assert partitions.fetch(0, PAGE, new, at=20.0) == (ContentKind.NEW, None)  # the page changed
    [(peer, notice)] = partitions.waiting(0)
    assert peer == 1 and notice == OutdatedNotice(PAGE, content_fingerprint(old.encode()), 20.0)
    # the notice not yet there: partition 1's oracle still names the page (the defect this fixes)
    assert partitions.fetch(1, "http://b.test/early", old, at=21.0) == (ContentKind.EXACT, PAGE)
    assert partitions.deliver(0) >= 1
    assert partitions.waiting(0) == []  # acknowledged: not sent again
    assert partitions.fetch(1, "http://c.test/copy", old, at=30.0) == (ContentKind.NEW, None)
    # nearly the old text: near-duplicate of the page that has it now, not of PAGE
    assert partitions.fetch(1, "http://d.test/near", changed(old, 2), at=40.0) == (
        ContentKind.NEAR,
        "http://c.test/copy",
    )
    # the new content is still the page's, on both partitions
    assert partitions.fetch(1, "http://e.test/new", new, at=50.0) == (ContentKind.EXACT, PAGE)


def test_applying_a_notice_twice_or_after_the_page_was_judged_again_removes_nothing_current(partitions: Any) -> None:
    old, new = owned_by(1, 300), text_of(301)
    partitions.fetch(0, PAGE, old, at=10.0)
    partitions.fetch(0, PAGE, new, at=20.0)
    [(_, notice)] = partitions.waiting(0)
    assert partitions.fetch(0, PAGE, old, at=30.0) == (ContentKind.NEW, None)  # changed back, notice late
    # the oracle still had (PAGE, 10.0): the page is first of `old` again by that entry, which the
    # late notice removes (the documented loss: a later copy is stored as new, never a page lost)
    late = partitions.sets[1].forget_outdated(notice)
    assert late
    again = partitions.sets[1].forget_outdated(notice)
    assert not again  # twice: nothing more
    # a notice for a version before the page's current one leaves the current one alone
    partitions.deliver(0)
    fingerprint = content_fingerprint(new.encode())
    stale = OutdatedNotice(PAGE, fingerprint, 15.0)  # older than the page's fetch of `new` at 20.0
    partitions.fetch(0, PAGE, new, at=40.0)
    assert not partitions.sets[content_owner(fingerprint, 2)].forget_outdated(stale)
    assert partitions.fetch(1, "http://f.test/new", new, at=50.0) == (ContentKind.EXACT, PAGE)


def test_a_notice_is_durable_with_the_forgetting_it_tells_of(tmp_path: Path) -> None:
    directory = tmp_path / "content"
    content = ContentSeen(directory)
    content.outdated_peers = (1, 2)
    old, new = text_of(400), text_of(401)
    content.check(PAGE, content_fingerprint(old.encode()), 1.0)
    content.checkpoint()
    content.check(PAGE, content_fingerprint(new.encode()), 2.0)
    assert [peer for peer, _ in content.outdated_waiting()] == [1, 2]
    content.abandon()  # a crash before any commit: the page's record and the notices are lost together
    reopened = ContentSeen(directory)
    assert list(reopened.outdated_waiting()) == []
    assert reopened.fingerprint_of(PAGE) == content_fingerprint(old.encode())
    reopened.outdated_peers = (1,)
    reopened.check(PAGE, content_fingerprint(new.encode()), 3.0)  # fetched again: told again
    reopened.commit()
    reopened.abandon()  # a crash after the commit: the notice waits, to be sent after the restart
    again = ContentSeen(directory)
    assert [(peer, notice.replaced_at) for peer, notice in again.outdated_waiting()] == [(1, 3.0)]
    again.outdated_delivered(1, PAGE, 3.0)
    assert list(again.outdated_waiting()) == []
    again.close()


def test_an_exact_copy_that_changes_tells_nobody(tmp_path: Path) -> None:
    content = ContentSeen(tmp_path)
    content.outdated_peers = (1,)
    body = text_of(500)
    content.check("http://original.test/", content_fingerprint(body.encode()), 1.0)
    content.check("http://copy.test/", content_fingerprint(body.encode()), 2.0)
    list(content.outdated_waiting())
    content.check("http://copy.test/", content_fingerprint(text_of(501).encode()), 3.0)
    assert list(content.outdated_waiting()) == []  # it was never first of its body, nor indexed
    content.close()


def test_delivery_sends_new_notices_once_and_again_only_after_the_resend_delay() -> None:
    delivery = OutdatedDelivery(resend_after=30.0)
    one, two = OutdatedNotice("http://a.test/", 1, 5.0), OutdatedNotice("http://b.test/", 2, 6.0)
    assert delivery.due([(1, one), (2, two)], now=100.0) == {1: [one], 2: [two]}
    assert delivery.due([(1, one), (2, two)], now=110.0) == {}  # sent, waiting for acknowledgements
    assert delivery.acknowledged_by(1, [(one.url, one.replaced_at)]) == [(one.url, one.replaced_at)]
    assert not delivery.resend_due(120.0) and delivery.resend_due(130.0)
    assert delivery.due([(2, two)], now=130.0) == {2: [two]}  # lost on the way: again
    assert (delivery.sent, delivery.resent, delivery.unacknowledged) == (3, 1, 1)
    restarted = OutdatedDelivery()  # a new process sends every notice still waiting at once
    assert restarted.due([(2, two)], now=0.0) == {2: [two]}


@pytest.mark.parametrize(
    "fields",
    [(3, 1, 1.0), ("", 1, 1.0), ("http://a.test/", -1, 1.0), ("http://a.test/", 1 << 64, 1.0),
     ("http://a.test/", True, 1.0), ("http://a.test/", 1, float("nan")), ("http://a.test/", 1, float("inf")),
     ("http://a.test/", 1, "soon")],
)  # fmt: skip
def test_a_malformed_notice_is_refused(fields: tuple[Any, Any, Any]) -> None:
    with pytest.raises(OutdatedNoticeError):
        checked_notice(*fields)


class NoticeInbox(FakeInbox):
    """An Inbox that records outdated notices and acknowledgements."""

    def __init__(self) -> None:
        super().__init__()
        self.notices: list[tuple[int, list[OutdatedNotice]]] = []
        self.acks: list[tuple[int, list[tuple[str, float]]]] = []

    def receive_outdated(self, sender: int, notices: list[OutdatedNotice]) -> None:
        self.notices.append((sender, notices))

    def outdated_acknowledged(self, peer: int, keys: list[tuple[str, float]]) -> None:
        self.acks.append((peer, keys))


NOTICE = OutdatedNotice("http://a.test/é", (1 << 64) - 1, 1234.5)


def test_the_socket_mesh_carries_notices_and_acknowledgements_and_drops_malformed_ones() -> None:
    async def run() -> None:
        ends, controls = socket.socketpair(), [socket.socketpair() for _ in range(2)]
        meshes = [SocketMesh(k, 2, {1 - k: ends[k]}, controls[k][0]) for k in range(2)]
        inboxes = [NoticeInbox() for _ in range(2)]
        for k in range(2):
            coordinator = await Channel.over(controls[k][1])
            coordinator.send(["go"])
            assert await meshes[k].ready()
            await meshes[k].start(inboxes[k])
        meshes[0]._send(1, ["od", 0, [["http://x.test/", "not a number", 1.0], 7]])  # both refused
        meshes[0]._send(1, ["od", 0])  # no notices at all
        meshes[0].transmit_outdated(1, [NOTICE])
        await until(lambda: bool(inboxes[1].notices))
        assert inboxes[1].notices == [(0, [NOTICE])]
        assert meshes[1].malformed_notices == 3
        meshes[1].acknowledge_outdated(0, [(NOTICE.url, NOTICE.replaced_at)])
        await until(lambda: bool(inboxes[0].acks))
        assert inboxes[0].acks == [(1, [(NOTICE.url, NOTICE.replaced_at)])]
        for mesh in meshes:
            await mesh.close()

    asyncio.run(run())


def test_redis_streams_carry_notices_and_acknowledgements_and_drop_malformed_ones(redis_server: RedisServer) -> None:
    async def run() -> None:
        connection = redis.asyncio.Redis.from_url(redis_server.url)
        nodes = [RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, k, 2) for k in range(2)]
        inboxes = [NoticeInbox() for _ in range(2)]
        for node, inbox in zip(nodes, inboxes, strict=True):
            await node.start(inbox)
        try:
            bad = wire.encode([wire.Outdated(0, [("http://x.test/", 5, float("nan")), ("", 5, 1.0)])])
            await connection.xadd(KEYS.stream(1), {b"m": bad})
            nodes[0].transmit_outdated(1, [NOTICE])
            await until(lambda: bool(inboxes[1].notices))
            assert inboxes[1].notices == [(0, [NOTICE])]
            assert nodes[1].errors["transport:malformed-outdated-notice"] == 2
            nodes[1].acknowledge_outdated(0, [(NOTICE.url, NOTICE.replaced_at)])
            await until(lambda: bool(inboxes[0].acks))
            assert inboxes[0].acks == [(1, [(NOTICE.url, NOTICE.replaced_at)])]
            assert nodes[0].wire.kinds_out["Outdated"] == 1 and nodes[1].wire.kinds_out["OutdatedAck"] == 1
        finally:
            for node in nodes:
                await node.close()
            await connection.aclose()

    asyncio.run(run())


async def two_inboxes(network: MemoryNetwork, root: Path) -> tuple[list[PartitionInbox], list[ContentSeen]]:
    """Two engines' partition inboxes over the in-memory network, with content sets and nothing else
    (outdated notices use no router, pipeline or journal)."""
    inboxes, contents = [], []
    for k in range(2):
        content = ContentSeen(root / str(k))
        content.outdated_peers = (1 - k,)  # as the composition root (crawl.assembly) sets it
        mesh = network.mesh(k, 2, hold_until_settled=False)
        inbox = PartitionInbox(
            mesh, None, links=None, ledger=None, content=content, stats=CrawlStats(), wake=lambda: None,  # type: ignore[arg-type]
            stop=lambda reason: None,
        )  # fmt: skip
        await inbox.connect(resend=False)
        inboxes.append(inbox)
        contents.append(content)
    return inboxes, contents


def test_notices_survive_loss_and_repeats_between_two_partition_inboxes(tmp_path: Path) -> None:
    """The engine's side over the in-memory network: a lost notice is sent again after the resend delay, a
    repeated one is applied twice harmlessly, and a notice is deleted at the sender only once acknowledged."""

    async def run() -> None:
        network = MemoryNetwork(drop_outdated=1, repeat=True)
        inboxes, contents = await two_inboxes(network, tmp_path)
        old, new = owned_by(1, 600), text_of(601)
        for at, body in ((10.0, old), (20.0, new)):
            fingerprint = content_fingerprint(body.encode())
            first = (
                contents[1].claim_first(fingerprint, PAGE, at)
                if fingerprint % 2
                else contents[0].claim_first(fingerprint, PAGE, at)
            )
            contents[0].check(PAGE, fingerprint, at, first=first)
        now = time.monotonic()
        inboxes[0].tell_outdated(now)  # sent, and lost
        await asyncio.sleep(0.01)
        assert network.counts["outdated notices dropped"] == 1
        assert len(list(contents[0].outdated_waiting())) == 1
        inboxes[0].tell_outdated(now + 1.0)  # not yet due again
        await asyncio.sleep(0.01)
        assert network.counts["outdated notices delivered"] == 0
        inboxes[0].tell_outdated(now + 31.0)  # unacknowledged for the resend delay: again (and repeated)
        await asyncio.sleep(0.01)
        assert network.counts["outdated notices delivered"] == 2
        assert contents[1].claim_first(content_fingerprint(old.encode()), "http://b.test/", 30.0)[0] == (
            "http://b.test/"
        )  # the oracle entry went: the copy is the body's first now
        assert len(list(contents[0].outdated_waiting())) == 1  # not acknowledged before partition 1 commits
        inboxes[1].tell_outdated(now + 31.5)  # partition 1 commits, then acknowledges
        await asyncio.sleep(0.01)
        assert list(contents[0].outdated_waiting()) == []
        assert inboxes[1]._stats.outdated_entries_removed >= 1 and inboxes[0]._stats.outdated_notices_sent == 2

    asyncio.run(run())


_KILLED_PARTITION = """
import sys, time
from pathlib import Path
from crawlspace.seen.content import ContentSeen, OutdatedNotice
from crawlspace.urls.fingerprint import content_fingerprint

role, directory, old, new = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
content = ContentSeen(directory, commit_every=1_000_000)
if role == "sender":  # the page changed, its notice committed with the forgetting: then killed unsent
    content.outdated_peers = (1,)
    content.check("http://a.test/page", content_fingerprint(old.encode()), 10.0)
    content.check("http://a.test/page", content_fingerprint(new.encode()), 20.0)
    content.commit()
else:  # the owner: it holds the old body's first URL, applies the notice, and is killed before its commit
    content.claim_first(content_fingerprint(old.encode()), "http://a.test/page", 10.0)
    content.checkpoint()
    assert content.forget_outdated(OutdatedNotice("http://a.test/page", content_fingerprint(old.encode()), 20.0))
print("ready", flush=True)
time.sleep(60)
"""


def test_a_notice_survives_kill_9_of_either_side_and_is_applied_after_the_restart(tmp_path: Path) -> None:
    """kill -9 of the sender after its notice was committed (not yet sent), and of the receiver after it
    applied the notice but before committing (so before it could acknowledge): both restarted, the
    notice goes again and the old body's first URL is gone from the owner for good."""
    old, new = owned_by(1, 700), text_of(701)
    for role in ("sender", "owner"):
        assert kill_at_first_line(_KILLED_PARTITION, role, str(tmp_path / role), old, new) == "ready"

    async def run() -> None:
        network = MemoryNetwork()
        contents = [ContentSeen(tmp_path / "sender"), ContentSeen(tmp_path / "owner")]
        inboxes = []
        for k, content in enumerate(contents):
            inbox = PartitionInbox(
                network.mesh(k, 2, hold_until_settled=False), None, links=None, ledger=None, content=content,  # type: ignore[arg-type]
                stats=CrawlStats(), wake=lambda: None, stop=lambda reason: None,
            )  # fmt: skip
            await inbox.connect(resend=False)
            inboxes.append(inbox)
        fingerprint = content_fingerprint(old.encode())
        # the owner's removal died with it: the stale first URL is back until the notice comes again
        assert contents[1].claim_first(fingerprint, "http://probe.test/", 30.0)[0] == "http://a.test/page"
        contents[1].abandon()  # (that probe claimed nothing durable)
        contents[1] = ContentSeen(tmp_path / "owner")
        inboxes[1]._content = contents[1]
        [(peer, notice)] = list(contents[0].outdated_waiting())  # the sender's notice outlived the kill
        assert peer == 1 and notice.replaced_at == 20.0
        inboxes[0].tell_outdated(time.monotonic())  # a restarted sender sends every notice it holds
        await asyncio.sleep(0.01)
        inboxes[1].tell_outdated(time.monotonic())  # applied, committed, acknowledged
        await asyncio.sleep(0.01)
        assert list(contents[0].outdated_waiting()) == []
        assert contents[1].claim_first(fingerprint, "http://b.test/copy", 30.0) == ("http://b.test/copy", 30.0)
        for content in contents:
            content.close()

    asyncio.run(run())


def test_the_rounds_run_while_notices_travel_and_sleep_otherwise(tmp_path: Path) -> None:
    """The partition's loop of rounds wakes when a notice is put here or comes in, and runs until every
    notice is applied and acknowledged; then it sleeps. It used to run a round every half second for the
    whole crawl (most crawls refresh nothing): CPU per second, paid per page when politeness slows a crawl."""

    async def run() -> tuple[list[int], list[int], list[int], int]:
        network = MemoryNetwork()
        inboxes, contents = await two_inboxes(network, tmp_path)
        rounds = [0, 0]
        for k, inbox in enumerate(inboxes):
            original = inbox.tell_outdated

            def counted(now: float | None = None, k: int = k, original: Any = original) -> None:
                rounds[k] += 1
                original(now)

            inbox.tell_outdated = counted  # type: ignore[method-assign]
        loops = [asyncio.create_task(inbox.tell_outdated_periodically(interval=0.01)) for inbox in inboxes]
        await asyncio.sleep(0.3)
        quiet = list(rounds)  # one round each at the start (notices an earlier run left), then asleep
        old, new = owned_by(1, 700), text_of(701)
        for at, body in ((10.0, old), (20.0, new)):  # the page changes at partition 0: a notice is put
            fingerprint = content_fingerprint(body.encode())
            owner = contents[fingerprint % 2]
            contents[0].check(PAGE, fingerprint, at, first=owner.claim_first(fingerprint, PAGE, at))
        await until(lambda: not list(contents[0].outdated_waiting()) and not inboxes[1]._acks_owed, 5.0)
        await asyncio.sleep(0.1)
        settled = list(rounds)
        await asyncio.sleep(0.3)
        for loop in loops:
            loop.cancel()
        return quiet, settled, list(rounds), network.counts["outdated notices delivered"]

    quiet, settled, after, delivered = asyncio.run(run())
    assert quiet == [1, 1]
    assert delivered == 1  # sent, applied and acknowledged: the partitions woke for it
    assert settled[0] > quiet[0] and settled[1] > quiet[1]
    assert after == settled  # asleep again (30 rounds each in 0.3 s at this interval before)
