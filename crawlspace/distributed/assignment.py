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
- `HostBucketAssignment` (what crawls are partitioned by from now on): rendezvous hashing of the
  key's host bucket (urls.fingerprint.host_bucket, 2^16 of them) instead of the key itself, so the
  owner of a host is also a function of its URLs' `HOST_BUCKET` fingerprints: a URL set splits by
  new owner in one scan when the crawl is resized (`owners_of_fingerprints`). The table of the 2^16
  buckets' owners is computed once (vectorized); a lookup is one hash and one index. Resizing moves
  ~1/N of the buckets, so ~1/N of the hosts.

Which rule a crawl directory uses is recorded with it (crawl.layout); a directory made before the
record is modulo-partitioned, and is switched to `HostBucketAssignment` when it is resized.

An implementer of another rule: `owner` must be deterministic across processes and machines
(never Python's `hash`, which is salted per process), and `partitions` is the N it was built for.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt
import xxhash

from crawlspace.urls.fingerprint import HOST_BUCKET_BITS, HOST_BUCKETS, host_bucket


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


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finalizer, element-wise (uint64 arithmetic wraps, as it should)."""
    values = values ^ (values >> np.uint64(30))
    values = values * np.uint64(0xBF58476D1CE4E5B9)
    values = values ^ (values >> np.uint64(27))
    values = values * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


def bucket_owners(partitions: int) -> npt.NDArray[np.int32]:
    """The owner of each host bucket among `partitions`: the partition with the highest score
    mix(bucket, partition); a partition's scores do not depend on how many others there are."""
    buckets = np.arange(HOST_BUCKETS, dtype=np.uint64)
    best = np.zeros(HOST_BUCKETS, np.int32)
    best_score = np.zeros(HOST_BUCKETS, np.uint64)
    with np.errstate(over="ignore"):
        for partition in range(partitions):
            seed = _mix(np.array([partition + 1], np.uint64) * _GOLDEN)[0]
            score = _mix(buckets * _GOLDEN + seed)
            wins = score > best_score if partition else np.ones(HOST_BUCKETS, np.bool_)
            best[wins] = partition
            best_score[wins] = score[wins]
    return best


class HostBucketAssignment(_FixedSize):
    """Rendezvous hashing of host buckets: resizing moves ~1/N of the hosts, and a URL set of
    `HOST_BUCKET` fingerprints splits by owner without knowing the URLs."""

    __slots__ = ("_owners",)

    def __init__(self, partitions: int) -> None:
        super().__init__(partitions)
        self._owners = bucket_owners(partitions)

    def owner(self, key: str) -> int:
        return int(self._owners[host_bucket(key)])

    def owners_of_fingerprints(self, fingerprints: npt.NDArray[np.uint64]) -> npt.NDArray[np.int32]:
        """The owner of the host of each `HOST_BUCKET` fingerprint."""
        return self._owners[(fingerprints >> np.uint64(64 - HOST_BUCKET_BITS)).astype(np.intp)]


ASSIGNMENTS: dict[str, type[ModuloAssignment] | type[RendezvousAssignment] | type[HostBucketAssignment]] = {
    "modulo": ModuloAssignment,
    "rendezvous": RendezvousAssignment,
    "host-buckets": HostBucketAssignment,
}
"""The rules by the name a crawl directory records (crawl.layout)."""


def content_owner(fingerprint: int, partitions: int) -> int:
    """The partition that answers "seen?" for a body fingerprint: the fingerprint is already a hash,
    so its value mod N is even; the exact-duplicate oracle is rebuilt per crawl, so resizing it is free."""
    return fingerprint % partitions


def band_owner(band_key: int, partitions: int) -> int:
    """The partition whose band table holds an LSH band key (distributed.nearclaims): a band key is
    an xxh3 hash, so its value mod N is even, as for `content_owner`."""
    return band_key % partitions
