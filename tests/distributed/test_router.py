"""PartitionRouter: what stays, what leaves, what is journaled, and a resume that gets it all back."""

from __future__ import annotations

from crawlspace.distributed.assignment import ModuloAssignment
from crawlspace.distributed.router import PartitionRouter
from crawlspace.frontier.entry import FrontierEntry


class RecordingJournal:
    """A RouterJournal that keeps the events, and plays them back into another router (a resume)."""

    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []

    def sent(self, peer: int, number: int, entry: FrontierEntry, *, forward: bool) -> None:
        self.events.append(("sent", peer, number, entry, forward))

    def acked(self, peer: int, number: int) -> None:
        self.events.append(("acked", peer, number))

    def moved(self, host: str, owner: int) -> None:
        self.events.append(("moved", host, owner))

    def pinned(self, host: str) -> None:
        self.events.append(("pinned", host))

    def replay_into(self, router: PartitionRouter) -> None:
        for kind, *fields in self.events:
            if kind == "sent":
                peer, number, entry, forward = fields
                router.replay_sent(peer, number, entry, forward=forward)  # type: ignore[arg-type]
            elif kind == "acked":
                router.replay_acked(*fields)  # type: ignore[arg-type]
            elif kind == "moved":
                router.replay_moved(*fields)  # type: ignore[arg-type]
            else:
                router.replay_pinned(*fields)  # type: ignore[arg-type]


ASSIGNMENT = ModuloAssignment(3)
HOSTS = [f"h{i}.test" for i in range(30)]


def entries(*hosts: str) -> list[FrontierEntry]:
    return [FrontierEntry(f"http://{host}/p", 1) for host in hosts]


def test_route_keeps_this_partitions_hosts_and_journals_the_rest() -> None:
    log = RecordingJournal()
    router = PartitionRouter(0, ASSIGNMENT, log, per_ip=False)
    mine, full = router.route(entries(*HOSTS))
    assert not full
    assert {e.url for e in mine} == {f"http://{h}/p" for h in HOSTS if ASSIGNMENT.owner(h) == 0}
    assert len(log.events) == len(HOSTS) - len(mine)
    assert all(event[0] == "sent" and event[1] != 0 for event in log.events)
    batches = router.cut()
    assert sorted(batch.peer for batch in batches) == [1, 2]
    assert router.cut() == []  # nothing open any more
    assert router.outbox.waiting == 2  # both wait for their acknowledgement
    assert router.acknowledge(batches[0].peer, batches[0].number)
    assert not router.acknowledge(batches[0].peer, batches[0].number)  # a repeat: nothing journaled
    assert [event[0] for event in log.events].count("acked") == 1


def test_a_host_moved_for_its_address_stays_moved_and_a_pinned_one_stays_here() -> None:
    log = RecordingJournal()
    router = PartitionRouter(0, ASSIGNMENT, log, per_ip=True)
    host = next(h for h in HOSTS if ASSIGNMENT.owner(h) == 0)
    address = next(f"127.0.0.{i}" for i in range(1, 50) if ASSIGNMENT.owner(f"127.0.0.{i}") == 2)
    assert router.owner_by_address(host, address) == 2
    assert router.owner(host) == 2 and router.owner_by_address(host, None) == 2
    assert log.events == [("moved", host, 2)]  # once
    router.hand_over(FrontierEntry(f"http://{host}/x"), 2)
    assert router.cut()[0].forward
    foreign = next(h for h in HOSTS if ASSIGNMENT.owner(h) == 1)
    router.pin(entries(foreign, foreign))
    assert router.owner(foreign) == 0 and router.owner_by_address(foreign, address) is None
    assert log.events[-1] == ("pinned", foreign) and len(log.events) == 3
    assert PartitionRouter(0, ASSIGNMENT, log, per_ip=False).owner_by_address(host, address) is None


def test_checkpoint_plus_journal_restores_every_unacknowledged_batch() -> None:
    """A resume: the checkpoint's batches and the journal since, acknowledged ones dropped."""
    log = RecordingJournal()
    router = PartitionRouter(1, ASSIGNMENT, log, per_ip=True)
    router.route(entries(*HOSTS[:10]))
    first = router.cut()
    state = router.checkpointed()  # the checkpoint
    log.events.clear()  # a new journal generation
    router.acknowledge(first[0].peer, first[0].number)
    router.route(entries(*HOSTS[10:]))
    router.cut()
    router.route(entries(*HOSTS[:3]))  # still open at the crash: journaled, never sent
    router.owner_by_address(HOSTS[5], "127.0.0.9")
    router.pin(entries(HOSTS[7]))
    expected = {(b.peer, b.number): [e.url for e in b.entries] for b in router.outbox.unacked.values()}
    expected.update({(b.peer, b.number): [e.url for e in b.entries] for b in router.outbox.pending.values()})

    resumed = PartitionRouter(1, ASSIGNMENT, RecordingJournal(), per_ip=True)
    resumed.start_replay(*state)
    log.replay_into(resumed)
    resumed.finish_replay()
    restored = {(b.peer, b.number): [e.url for e in b.entries] for b in resumed.unacknowledged}
    assert restored == expected
    assert resumed.moved == router.moved and resumed.pinned == router.pinned
    assert resumed.outbox.next_number == router.outbox.next_number  # numbers are never reused
    assert "PartitionRouter(1 of 3" in repr(resumed)
