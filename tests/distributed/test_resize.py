"""The re-partitioning decisions of a resized crawl, without I/O: who owns what after a resize, what
each partition hands to whom, the URL set split by host bucket, the wire format of the parts."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from crawlspace.distributed.assignment import HostBucketAssignment, ModuloAssignment
from crawlspace.distributed.resize import (
    FRONTIER_PART_URLS,
    FrontierPart,
    HandoverError,
    HandoverOutbox,
    HandoverPlan,
    HostsPart,
    Resize,
    SeenPart,
    decode_part,
    encode_part,
)
from crawlspace.frontier import FrontierEntry
from crawlspace.urls import url_fingerprint
from crawlspace.urls.fingerprint import UrlFingerprints, bucket_of_fingerprint, host_bucket, host_bucket_fingerprint

HOSTS = [f"site{i:04d}.test" for i in range(400)] + ["a.test:8080", "127.0.0.1"]


def urls_of(hosts: list[str], per_host: int = 5) -> list[str]:
    return [f"http://{host}/p{page}.html" for host in hosts for page in range(per_host)]


def test_host_bucket_fingerprints_carry_their_host_and_split_by_owner() -> None:
    assignment = HostBucketAssignment(3)
    for url in urls_of(HOSTS, 2):
        host = url.split("/")[2]
        fingerprint = host_bucket_fingerprint(url)
        assert bucket_of_fingerprint(fingerprint) == host_bucket(host)
        owner = assignment.owners_of_fingerprints(np.array([fingerprint], np.uint64))[0]
        assert owner == assignment.owner(host)
    distinct = {host_bucket_fingerprint(url) for url in urls_of(HOSTS, 50)}
    assert len(distinct) == len(HOSTS) * 50, "no collisions among 20,000 URLs"


def test_resizing_host_buckets_moves_only_to_the_new_partition_and_about_one_in_n() -> None:
    for n in (2, 3, 5):
        before, after = HostBucketAssignment(n), HostBucketAssignment(n + 1)
        moved = [host for host in HOSTS if before.owner(host) != after.owner(host)]
        assert all(after.owner(host) == n for host in moved), "a host moves only to the partition added"
        assert 0.5 / (n + 1) < len(moved) / len(HOSTS) < 1.6 / (n + 1)
        shrunk = HostBucketAssignment(n - 1) if n > 2 else None
        if shrunk is not None:  # removing the last partition moves only its own hosts
            assert all(shrunk.owner(h) == before.owner(h) for h in HOSTS if before.owner(h) < n - 1)


def entries(urls: list[str]) -> list[FrontierEntry]:
    return [FrontierEntry(url, 1, 0) for url in urls]


def test_frontier_parts_go_to_the_new_owners_and_leave_finished_urls_behind() -> None:
    assignment = HostBucketAssignment(3)
    plan = HandoverPlan(1, assignment, fingerprints=UrlFingerprints.HOST_BUCKET, per_ip=True)
    queued = urls_of(HOSTS)
    finished = {url_fingerprint(queued[0]), url_fingerprint(queued[7])}
    moved_away = {HOSTS[3]}
    parts = plan.frontier_parts(entries(queued), finished=finished, sitemaps={queued[12]}, moved_away=moved_away)
    assert 1 not in parts, "nothing is sent to oneself"
    sent = {}
    for owner, owner_parts in parts.items():
        for part in owner_parts:
            assert len(part.entries) + len(part.unconfirmed) <= FRONTIER_PART_URLS
            for url, depth, hops in part.entries:
                sent[url] = (owner, "confirmed")
                assert (depth, hops) == (1, 0)
            for url, _, _ in part.unconfirmed:
                sent[url] = (owner, "unconfirmed")
    expected = {
        url for url in queued if assignment.owner(url.split("/")[2]) != 1 and url_fingerprint(url) not in finished
    }
    assert set(sent) == expected
    for url, (owner, kind) in sent.items():
        host = url.split("/")[2]
        assert owner == assignment.owner(host)
        assert kind == ("unconfirmed" if host in moved_away else "confirmed")
    if queued[12] in sent:
        assert any(queued[12] in part.sitemaps for part in parts[sent[queued[12]][0]])


def test_unacknowledged_forwards_travel_though_their_leases_ended() -> None:
    """A URL handed to the owner of its address ended its lease here (journaled done, so after a kill
    it is `finished`), but until that owner acknowledged it nobody may have it queued: it travels."""
    assignment = HostBucketAssignment(3)
    plan = HandoverPlan(1, assignment, fingerprints=UrlFingerprints.HOST_BUCKET, per_ip=True)
    leaving = [url for url in urls_of(HOSTS) if assignment.owner(url.split("/")[2]) != 1]
    queued_copy, forward = leaving[0], leaving[1]
    finished = {url_fingerprint(queued_copy), url_fingerprint(forward)}
    moved_away = {forward.split("/")[2]}
    parts = plan.frontier_parts(
        entries([queued_copy]), finished=finished, sitemaps=set(), moved_away=moved_away, in_flight=entries([forward])
    )
    sent = [
        (owner, url, kind)
        for owner, owner_parts in parts.items()
        for part in owner_parts
        for kind, rows in (("confirmed", part.entries), ("unconfirmed", part.unconfirmed))
        for url, _, _ in rows
    ]
    assert sent == [(assignment.owner(forward.split("/")[2]), forward, "unconfirmed")]  # the queued copy stays


def test_a_draining_partition_hands_over_every_host() -> None:
    resize = Resize(previous=3, partitions=2, epoch=1)
    assert resize.workers == 3 and resize.draining(2) and not resize.draining(1)
    plan = HandoverPlan(2, HostBucketAssignment(2), fingerprints=UrlFingerprints.HOST_BUCKET, per_ip=False)
    assert all(plan.leaving(host) for host in HOSTS)
    parts = plan.frontier_parts(entries(urls_of(HOSTS)), finished=set(), sitemaps=set())
    assert sum(len(part.entries) for owner in parts.values() for part in owner) == len(HOSTS) * 5
    with pytest.raises(ValueError):
        Resize(previous=2, partitions=0, epoch=1)


def scan(values: np.ndarray, chunk: int = 1000) -> list[np.ndarray]:
    return [values[start : start + chunk] for start in range(0, values.size, chunk)]


def test_the_url_set_splits_by_host_bucket_in_one_scan_without_per_ip() -> None:
    assignment = HostBucketAssignment(3)
    plan = HandoverPlan(0, assignment, fingerprints=UrlFingerprints.HOST_BUCKET, per_ip=False)
    assert plan.split_seen
    urls = urls_of(HOSTS, 20)
    fingerprints = np.array(sorted({host_bucket_fingerprint(url) for url in urls}), np.uint64)
    queued = np.array(sorted(host_bucket_fingerprint(url) for url in urls[:30]), np.uint64)
    parts = plan.seen_parts(scan(fingerprints), queued)
    assert 0 not in parts
    received = {peer: np.concatenate([part.array() for part in peer_parts]) for peer, peer_parts in parts.items()}
    owner_of = {host_bucket_fingerprint(url): assignment.owner(url.split("/")[2]) for url in urls}
    for peer, values in received.items():
        assert all(owner_of[int(value)] == peer for value in values), "each fingerprint to its host's owner only"
    all_sent = np.concatenate(list(received.values()))
    assert all_sent.size == np.unique(all_sent).size, "each at most once"
    expected = {value for value, owner in owner_of.items() if owner != 0} - set(queued.tolist())
    assert set(all_sent.tolist()) == expected, "all of the others' fingerprints but the queued URLs'"


@pytest.mark.parametrize(
    ("fingerprints", "per_ip", "assignment"),
    [
        (UrlFingerprints.HOST_BUCKET, True, HostBucketAssignment(3)),  # a host may move to its address's owner
        (UrlFingerprints.FLAT, False, HostBucketAssignment(3)),  # no host in the fingerprint
        (UrlFingerprints.HOST_BUCKET, False, ModuloAssignment(3)),  # ownership not by bucket
    ],
)
def test_otherwise_every_member_gets_every_fingerprint(
    fingerprints: UrlFingerprints, per_ip: bool, assignment: HostBucketAssignment | ModuloAssignment
) -> None:
    plan = HandoverPlan(2, assignment, fingerprints=fingerprints, per_ip=per_ip)
    assert not plan.split_seen
    values = np.arange(1, 300_001, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    parts = plan.seen_parts(scan(values, 70_000))
    assert sorted(parts) == [0, 1]
    for peer_parts in parts.values():
        assert len(peer_parts) == 3  # cut at SEEN_PART_FINGERPRINTS
        got = np.concatenate([part.array() for part in peer_parts])
        assert np.array_equal(np.sort(got), np.sort(values))


def test_hosts_parts_carry_counts_and_robots_waits_to_owners_and_seeds_to_all() -> None:
    assignment = HostBucketAssignment(3)
    plan = HandoverPlan(0, assignment, fingerprints=UrlFingerprints.HOST_BUCKET, per_ip=True)
    counts = {host: (index, 1) for index, host in enumerate(HOSTS)}
    parts = plan.hosts_parts(counts, ["http://seed.test/"], robots_waiting=HOSTS[:40])
    assert sorted(parts) == [1, 2]
    for peer, (part,) in parts.items():
        assert part.seeds == ["http://seed.test/"]
        assert all(assignment.owner(host) == peer for host in part.hosts)
        assert all(assignment.owner(host) == peer for host in part.robots_waiting)
    handed = {host for (part,) in parts.values() for host in part.hosts}
    assert handed == {host for host in HOSTS if assignment.owner(host) != 0}


def test_parts_round_trip_and_bad_ones_are_refused() -> None:
    for part in (
        FrontierPart([("http://a.test/", 2, 1)], ["http://a.test/"], [("http://b.test/", 0, 0)]),
        SeenPart(np.arange(5, dtype="<u8").tobytes()),
        HostsPart({"a.test": (3, 1)}, ["http://a.test/"], ["b.test"]),
    ):
        assert decode_part(encode_part(part)) == part
    with pytest.raises(HandoverError, match="unreadable"):
        decode_part(b"\x93garbage")
    with pytest.raises(HandoverError, match="version"):
        decode_part(msgspec.msgpack.encode([99, ["seen", b""]]))
    with pytest.raises(HandoverError, match="whole fingerprints"):
        SeenPart(b"\x00" * 7).array()


def test_the_outbox_keeps_parts_until_acknowledged() -> None:
    outbox = HandoverOutbox()
    first = outbox.add(1, SeenPart(b""))
    second = outbox.add(2, SeenPart(b""))
    assert first != second and not outbox.complete
    assert outbox.acknowledge(1, first)
    assert not outbox.acknowledge(1, first), "a repeated acknowledgement counts once"
    assert not outbox.acknowledge(1, second), "acknowledged by the wrong partition"
    assert outbox.acknowledge(2, second) and outbox.complete and outbox.acknowledged == 2
