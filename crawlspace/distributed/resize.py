"""Re-partitioning a crawl resumed with another number of partitions: who hands what to whom.

A crawl of N partitions resumed as M runs a start-up phase before any fetch. Each of the
max(N, M) partitions, with only its own directory, reads what its state holds for hosts it does
not own under the new assignment (all of it, for a *draining* partition k >= M) and hands it to
the new owners in numbered parts; each receiver makes a part durable (its checkpoint) before it
acknowledges, and a sender removes the handed-over hosts from its frontier only in the checkpoint
that follows the last acknowledgement (`HandoverOutbox.complete`). When every partition has said
so, the crawl begins; a partition killed at any moment repeats its phase from its last checkpoint,
and receivers drop what they already have (URL set fingerprints are a set; frontier entries go
through a handover set of their own, `Repartition` in crawl/repartition.py). Nothing is fetched
during the phase, so no new owner tests a moved host's URL against its URL set before the host's
seen entries have arrived.

What travels (`Part`):
- `FrontierPart`: queued URLs of the hosts leaving, by their new owner (URLs finished since the
  last checkpoint are left out: they were fetched), and which of them are sitemap files. The new
  owner queues them (once, whoever else held them too) and adds them to its URL set. URLs queued
  for a host the sender had handed to the owner of its address travel apart (`unconfirmed`): the
  host's URL set never saw them, so the new owner tests them once every part is in.
- `SeenPart`: URL-set fingerprints, less those of URLs queued (they travel as queued URLs), so that
  what a partition's URL set knows is what it queued itself or what was fetched somewhere. With
  `HOST_BUCKET` fingerprints and without per-IP politeness each goes to the owner of its host
  bucket only (`HostBucketAssignment.owners_of_fingerprints`: one scan splits the set). Otherwise
  every member receives every fingerprint: a FLAT set cannot be split by host, and with per-IP
  politeness a host later moves to the owner of its address, whichever bucket it is in, and that
  partition must know which of the host's URLs were fetched (a fingerprint of a URL fetched
  anywhere is never a wrong "seen": it costs disk, not a URL; per-IP forwards are tested against
  the URLs of pinned hosts queued here, never the URL set, crawl/links.py `submit_forwarded`).
- `HostsPart`: per-host admission counts (`max_pages_per_host`) of the leaving hosts, which of them
  wait for an unreachable robots.txt (a crawl does not idle only for those), and the seeds (a new
  partition's scope is the crawl's). The robots.txt cache itself stays: a new owner fetches a moved
  host's robots.txt again before its first URL (one request per moved host, as after its TTL).

Moves and pins for per-IP politeness are decisions of the old assignment: they are dropped, and
each host's owner decides again from its address, as in any crawl.

Pure: no sockets, no files; the transport carries `encode_part` bytes, the engine applies them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec
import numpy as np
import numpy.typing as npt

from crawlspace.distributed.assignment import Assignment, HostBucketAssignment
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.urls import host_of, url_fingerprint
from crawlspace.urls.fingerprint import UrlFingerprints

PART_VERSION = 1
FRONTIER_PART_URLS = 4096
SEEN_PART_FINGERPRINTS = 1 << 17  # 1 MiB of fingerprints per part


class HandoverError(Exception):
    """A handover part that cannot be read (a foreign or damaged message): counted, never applied."""


class FrontierPart(msgspec.Struct, tag="frontier", array_like=True, frozen=True):
    entries: list[tuple[str, int, int]]  # (url, depth, hops)
    sitemaps: list[str] = []  # those of `entries` that are sitemap files
    unconfirmed: list[tuple[str, int, int]] = []  # queued for a host the sender had moved away (per IP):
    # never tested by the host's URL set, tested by the new owner's once every part is in


class SeenPart(msgspec.Struct, tag="seen", array_like=True, frozen=True):
    fingerprints: bytes  # little-endian uint64, any order

    def array(self) -> npt.NDArray[np.uint64]:
        if len(self.fingerprints) % 8:
            raise HandoverError(f"a seen part of {len(self.fingerprints)} bytes (not whole fingerprints)")
        return np.frombuffer(self.fingerprints, dtype="<u8").astype(np.uint64)


class HostsPart(msgspec.Struct, tag="hosts", array_like=True, frozen=True):
    hosts: dict[str, tuple[int, int]]  # host -> (URLs admitted, shallowest depth)
    seeds: list[str] = []
    robots_waiting: list[str] = []  # hosts whose URLs wait for an unreachable robots.txt to come back


Part = FrontierPart | SeenPart | HostsPart


class _Envelope(msgspec.Struct, array_like=True, frozen=True):
    version: int
    part: Part


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Envelope)


def encode_part(part: Part) -> bytes:
    return _encoder.encode(_Envelope(PART_VERSION, part))


def decode_part(data: bytes) -> Part:
    try:
        envelope = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise HandoverError(f"unreadable handover part: {exc}") from None
    if envelope.version != PART_VERSION:
        raise HandoverError(f"handover part version {envelope.version}, this crawler reads {PART_VERSION}")
    return envelope.part


def part_size(part: Part) -> int:
    """What a part carries, for counting: URLs, fingerprints or hosts."""
    if isinstance(part, FrontierPart):
        return len(part.entries) + len(part.unconfirmed)
    if isinstance(part, SeenPart):
        return len(part.fingerprints) // 8
    return len(part.hosts)


def _rows(entries: list[FrontierEntry]) -> list[tuple[str, int, int]]:
    return [(entry.url, entry.depth, entry.hops) for entry in entries]


@dataclass(frozen=True, slots=True)
class Resize:
    """A crawl of `previous` partitions resumed as `partitions`, the `epoch`-th resize of its directory."""

    previous: int
    partitions: int
    epoch: int

    def __post_init__(self) -> None:
        if self.previous < 1 or self.partitions < 1 or self.epoch < 1:
            raise ValueError(f"not a resize: {self!r}")

    @property
    def workers(self) -> int:
        """Partitions taking part in the phase: the new ones and the old ones leaving."""
        return max(self.previous, self.partitions)

    def draining(self, index: int) -> bool:
        """An old partition beyond the new count: it hands over everything, then ends."""
        return index >= self.partitions


class HandoverPlan:
    """What partition `index` hands to whom, under the `assignment` of the new size."""

    def __init__(self, index: int, assignment: Assignment, *, fingerprints: UrlFingerprints, per_ip: bool) -> None:
        self.index = index
        self.assignment = assignment
        self.members = assignment.partitions
        self.split_seen = fingerprints.splits_by_host and not per_ip and isinstance(assignment, HostBucketAssignment)

    def __repr__(self) -> str:
        how = "split by host bucket" if self.split_seen else "to every member"
        return f"HandoverPlan(partition {self.index} of {self.members}, seen entries {how})"

    def leaving(self, host: str) -> bool:
        """Does `host` belong to another partition now? (Every host does, for a draining partition.)"""
        return self.assignment.owner(host) != self.index

    def frontier_parts(
        self,
        entries: Iterable[FrontierEntry],
        *,
        finished: set[int],
        sitemaps: set[str],
        moved_away: set[str] | frozenset[str] = frozenset(),
        in_flight: Iterable[FrontierEntry] = (),
    ) -> dict[int, list[FrontierPart]]:
        """The queued URLs of leaving hosts by new owner, in parts; `finished`: fingerprints
        (urls.url_fingerprint) of URLs finished since the checkpoint, whose queued copies stay behind;
        `in_flight`: URLs handed to the owner of their address that it never acknowledged (finished
        here, queued nowhere for sure), which travel whatever `finished` says; `moved_away`: hosts
        this partition had handed over for per-IP politeness (their URLs go as `unconfirmed`)."""
        by_owner: dict[int, tuple[list[FrontierEntry], list[FrontierEntry]]] = {}
        owner_of = self.assignment.owner
        tagged = itertools.chain(((entry, True) for entry in entries), ((entry, False) for entry in in_flight))
        for entry, queued in tagged:
            host = host_of(entry.url)
            owner = owner_of(host)
            if owner == self.index or (queued and finished and url_fingerprint(entry.url) in finished):
                continue
            confirmed, unconfirmed = by_owner.setdefault(owner, ([], []))
            (unconfirmed if host in moved_away else confirmed).append(entry)
        parts: dict[int, list[FrontierPart]] = {}
        for owner, (confirmed, unconfirmed) in sorted(by_owner.items()):
            for start in range(0, len(confirmed), FRONTIER_PART_URLS):
                chunk = confirmed[start : start + FRONTIER_PART_URLS]
                parts.setdefault(owner, []).append(
                    FrontierPart(_rows(chunk), [entry.url for entry in chunk if entry.url in sitemaps])
                )
            for start in range(0, len(unconfirmed), FRONTIER_PART_URLS):
                chunk = unconfirmed[start : start + FRONTIER_PART_URLS]
                parts.setdefault(owner, []).append(
                    FrontierPart([], [entry.url for entry in chunk if entry.url in sitemaps], _rows(chunk))
                )
        return parts

    def seen_destinations(self, fingerprints: npt.NDArray[np.uint64]) -> dict[int, npt.NDArray[np.uint64]]:
        """Which members get which of a chunk of this partition's URL-set fingerprints (never itself)."""
        if not self.split_seen:
            return {peer: fingerprints for peer in range(self.members) if peer != self.index}
        assert isinstance(self.assignment, HostBucketAssignment)
        owners = self.assignment.owners_of_fingerprints(fingerprints)
        return {
            int(owner): fingerprints[owners == owner] for owner in np.unique(owners).tolist() if owner != self.index
        }

    def seen_parts(
        self, chunks: Iterable[npt.NDArray[np.uint64]], queued: npt.NDArray[np.uint64] | None = None
    ) -> dict[int, list[SeenPart]]:
        """A URL set's scan cut into parts by destination, `SEEN_PART_FINGERPRINTS` at most each;
        `queued`: sorted fingerprints (the set's spelling) of URLs queued here, which stay out."""
        pending: dict[int, list[npt.NDArray[np.uint64]]] = {}
        parts: dict[int, list[SeenPart]] = {}

        def cut(peer: int, *, final: bool = False) -> None:
            values = np.concatenate(pending.pop(peer))
            whole = values.size if final else values.size - values.size % SEEN_PART_FINGERPRINTS
            for start in range(0, whole, SEEN_PART_FINGERPRINTS):
                piece = values[start : min(start + SEEN_PART_FINGERPRINTS, whole)].astype("<u8")
                parts.setdefault(peer, []).append(SeenPart(piece.tobytes()))
            if whole < values.size:
                pending[peer] = [values[whole:]]

        for chunk in chunks:
            chunk = np.asarray(chunk, np.uint64)
            if queued is not None and queued.size:
                chunk = chunk[~np.isin(chunk, queued, assume_unique=False)]
            for peer, values in self.seen_destinations(chunk).items():
                if values.size:
                    pending.setdefault(peer, []).append(values)
                    if sum(piece.size for piece in pending[peer]) >= SEEN_PART_FINGERPRINTS:
                        cut(peer)
        for peer in sorted(pending):
            cut(peer, final=True)
        return parts

    def hosts_parts(
        self, counts: dict[str, tuple[int, int]], seeds: list[str], robots_waiting: Iterable[str] = ()
    ) -> dict[int, list[HostsPart]]:
        """Admission counts and robots.txt waits of leaving hosts to their owners; the seeds to every
        other member."""
        by_owner: dict[int, dict[str, tuple[int, int]]] = {}
        waiting: dict[int, list[str]] = {}
        for host, value in counts.items():
            owner = self.assignment.owner(host)
            if owner != self.index:
                by_owner.setdefault(owner, {})[host] = value
        for host in sorted(robots_waiting):
            owner = self.assignment.owner(host)
            if owner != self.index:
                waiting.setdefault(owner, []).append(host)
        return {
            peer: [HostsPart(by_owner.get(peer, {}), seeds, waiting.get(peer, []))]
            for peer in range(self.members)
            if peer != self.index and (peer in by_owner or peer in waiting or seeds)
        }


@dataclass
class HandoverOutbox:
    """The parts a partition hands over, numbered per sender, kept until their receiver acknowledges
    having made them durable; `complete` once none is left."""

    unacked: dict[tuple[int, int], Part] = field(default_factory=dict)
    next_number: int = 1
    acknowledged: int = 0

    def __repr__(self) -> str:
        return f"HandoverOutbox({len(self.unacked)} unacknowledged, {self.acknowledged} acknowledged)"

    def add(self, peer: int, part: Part) -> int:
        number = self.next_number
        self.next_number += 1
        self.unacked[(peer, number)] = part
        return number

    def acknowledge(self, peer: int, number: int) -> bool:
        if self.unacked.pop((peer, number), None) is None:
            return False
        self.acknowledged += 1
        return True

    @property
    def complete(self) -> bool:
        return not self.unacked
