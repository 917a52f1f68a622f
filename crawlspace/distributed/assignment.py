"""Which partition owns a host (or an IP address, with per-IP politeness): the host splitter's rule.

Ownership must be a pure function of the key and the cluster's shape, known alike to every
partition without asking anyone, and stable across restarts: a resumed crawl finds each host's
queue, URL set and robots.txt where it left them. Two rules:

- `ModuloAssignment` (the default, what every crawl directory so far was partitioned by):
  xxh3(key) mod N. Cheap, even, but a change of N moves almost every host (N/(N+1) of them).
- `RendezvousAssignment` (highest random weight, Thaler & Ravishankar): each key goes to the
  partition with the highest xxh3(key, partition) score. Adding a partition moves only the ~1/(N+1)
  of hosts it now wins; removing one moves only its own. This is the rule for a cluster that grows
  or shrinks (several machines), at the cost of N hashes per lookup instead of one: a few
  microseconds per routed URL for the tens of partitions of a cluster.

An implementer of another rule: `owner` must be deterministic across processes and machines
(never Python's `hash`, which is salted per process), and `partitions` is the N it was built for.
"""

from __future__ import annotations

from typing import Protocol

import xxhash


class Assignment(Protocol):
    """Maps a host (`host[:port]` as in normalized URLs) or an IP address to its owning partition."""

    @property
    def partitions(self) -> int: ...

    def owner(self, key: str) -> int:
        """The partition in `range(partitions)` that owns `key`; the same answer everywhere, always."""
        ...


def _key_bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogatepass")


class _FixedSize:
    """The part both rules share: a cluster of `partitions`, fixed for the assignment's life."""

    __slots__ = ("_partitions",)

    def __init__(self, partitions: int) -> None:
        if partitions < 1:
            raise ValueError("an assignment needs at least one partition")
        self._partitions = partitions

    @property
    def partitions(self) -> int:
        return self._partitions

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._partitions})"


class ModuloAssignment(_FixedSize):
    """xxh3_64(key) mod N: the partitioning of every crawl made with `--processes`."""

    __slots__ = ()

    def owner(self, key: str) -> int:
        if self._partitions == 1:
            return 0
        return int(xxhash.xxh3_64_intdigest(_key_bytes(key)) % self._partitions)


class RendezvousAssignment(_FixedSize):
    """Highest-random-weight hashing: resizing from N to N±1 partitions moves about 1/N of the keys."""

    __slots__ = ()

    def owner(self, key: str) -> int:
        if self._partitions == 1:
            return 0
        data = _key_bytes(key)
        scores = [xxhash.xxh3_64_intdigest(data, seed=partition) for partition in range(self._partitions)]
        return max(range(self._partitions), key=scores.__getitem__)


def content_owner(fingerprint: int, partitions: int) -> int:
    """The partition that answers "seen?" for a body fingerprint: the fingerprint is already a hash,
    so its value mod N is even; the exact-duplicate oracle is rebuilt per crawl, so resizing it is free."""
    return fingerprint % partitions


def band_owner(band_key: int, partitions: int) -> int:
    """The partition whose band table holds an LSH band key (distributed.nearclaims): a band key is
    an xxh3 hash, so its value mod N is even, as for `content_owner`."""
    return band_key % partitions
