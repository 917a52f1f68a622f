"""Duplicate URL elimination over 64-bit fingerprints of normalized URLs (Mercator, IRLbot's DRUM).

Who fills it and who drains it: the engine submits the fingerprint of every normalized link
together with its frontier entry; a bounded cache of recent and popular fingerprints answers
most of them at once (a page's navigation links repeat on every page of its site), and the
rest wait in a buffer. When the buffer is full, when the frontier runs low and before every
checkpoint the engine drains it: the buffer is sorted, deduplicated and checked in one batch
against the disk-resident sorted set (`sortedruns.RunStore`, a merge against sorted runs),
the fingerprints not found there are inserted, and the entries of the new ones come back in
the order they were submitted, to go on to the frontier.

Invariants: every fingerprint in the cache is in the set (so a cache hit is never a false
"seen"); a drained fingerprint is in the set before its entry leaves (so no URL is let
through twice); the first submission of a new fingerprint is the one let through. Memory is
the cache budget plus the buffer (fingerprints, entries and the sort of a drain) plus the
set's in-memory tail of at most one buffer, and does not grow with the URLs seen (the runs'
sparse index aside: 1/1024 of their disk size).

Distribution: the set behind the buffer is anything with the batched `FingerprintSet`
protocol. `PartitionedFingerprintSet` splits the fingerprint space by `fp mod n` and sends
each partition one sorted batch per drain, so a partition can live on another node.

Measured against embedded stores (`python bench/seen/bench_urlset.py stores --cache-mb 16`: 10 M
fingerprints inserted, then 10 M checks of which half hits, all batched through this class with
a 16 MB cache and a 2 M buffer so that the store does the work; 2-core VM, one run, side by side):

  store                         checks/s   disk B/URL (worst)   peak RSS
  sorted runs (kept)           2,633,780      8.0 (8.0)           463 MB
  LMDB, put(overwrite=False)   1,155,847     68.0 (71.9)         1642 MB   (its map counts in RSS)
  SQLite, WAL, temp-table join   458,221     15.3 (31.4)          707 MB
  Python set (no disk)         2,945,460      -                  1344 MB

The sorted runs are kept: 2.3 times LMDB's and 5.7 times SQLite's rate, the only one within 12
bytes per URL, and their memory is the budgets, not the set. At 100 M fingerprints: 1.2 M
checks/s, 740 MB peak RSS, 8.0 bytes per URL (11.2 at worst), see bench/seen/README.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from crawlspace.seen.sortedruns import BoolArray, FpArray, RunStore, SeenStateError
from crawlspace.urls.fingerprint import UrlFingerprints

T = TypeVar("T")

CACHE_WAYS = 4
CACHE_BYTES_PER_SET = CACHE_WAYS * 8 + 1
WAY_SHIFTS = (2 * np.arange(CACHE_WAYS, dtype=np.uint8))[None, :]
CACHE_PROBE_CHUNK = 1 << 16
HIT_SATURATION = 3
MIX = 0x9E3779B97F4A7C15
SCHEME_FILE = "FINGERPRINTS"
"""In a URL set's directory: how its fingerprints are spelled (urls.fingerprint.UrlFingerprints)."""
SCAN_CHUNK = 1 << 17


class FingerprintSet(Protocol):
    """A set of 64-bit fingerprints answering in batches: a local disk set, a partition, a remote node.

    Implementers: every call takes a one-dimensional `uint64` array, sorted and without
    repeats, and returns a boolean array aligned with it. Keep one round trip per call: the
    caller batches so that you can. `checkpoint` makes the set durable as of the call (after a
    crash the set reopens exactly as at the last checkpoint, never later: the crawl's frontier
    is checkpointed with it, and a URL in the set but not in the frontier would be lost).
    """

    def test_and_set(self, fingerprints: FpArray) -> BoolArray:
        """Insert the fingerprints; True for those that were not in the set before."""
        ...

    def contains(self, fingerprints: FpArray) -> BoolArray: ...

    def checkpoint(self) -> None: ...

    def close(self, *, checkpoint: bool = True) -> None:
        """Release; with `checkpoint=False` what was inserted since the last checkpoint is forgotten."""
        ...

    def scan(self, chunk: int = SCAN_CHUNK) -> Iterator[FpArray]:
        """Every fingerprint in the set once, in arrays of at most `chunk` (each sorted; the
        arrays need not be in order): what a resized crawl hands to the new owners."""
        ...

    def __len__(self) -> int: ...


class PartitionedFingerprintSet:
    """The fingerprint space split over `n` sets by `fp mod n`; one sorted batch per partition per call.

    Each partition checkpoints on its own: across partitions the checkpoint is not atomic, which
    the distributed crawl coordinates (a partition ahead of the others only holds extra URLs
    that its owner fetches again after a crash).
    """

    def __init__(self, partitions: Sequence[FingerprintSet]) -> None:
        if not partitions:
            raise ValueError("at least one partition is needed")
        self.partitions = list(partitions)

    @classmethod
    def open_local(
        cls, directory: str | Path, partitions: int, *, memtable_limit: int = 1 << 20, reset: bool = False
    ) -> PartitionedFingerprintSet:
        """`partitions` disk sets under DIRECTORY/part-NNN (what one node of a cluster would hold one of)."""
        root = Path(directory)
        return cls(
            [
                RunStore(root / f"part-{index:03d}", memtable_limit=memtable_limit, reset=reset)
                for index in range(partitions)
            ]
        )

    def __repr__(self) -> str:
        return f"PartitionedFingerprintSet({len(self.partitions)} partitions, {len(self)} fingerprints)"

    def partition_of(self, fingerprints: FpArray) -> npt.NDArray[np.intp]:
        return (np.asarray(fingerprints, np.uint64) % np.uint64(len(self.partitions))).astype(np.intp)

    def _scatter(self, fingerprints: FpArray, new: bool) -> BoolArray:
        fingerprints = np.asarray(fingerprints, np.uint64)
        result = np.zeros(fingerprints.size, np.bool_)
        owners = self.partition_of(fingerprints)
        for index, partition in enumerate(self.partitions):
            selected = np.flatnonzero(owners == index)
            if selected.size:
                batch = fingerprints[selected]
                result[selected] = partition.test_and_set(batch) if new else partition.contains(batch)
        return result

    def test_and_set(self, fingerprints: FpArray) -> BoolArray:
        return self._scatter(fingerprints, True)

    def contains(self, fingerprints: FpArray) -> BoolArray:
        return self._scatter(fingerprints, False)

    def checkpoint(self) -> None:
        for partition in self.partitions:
            partition.checkpoint()

    def scan(self, chunk: int = SCAN_CHUNK) -> Iterator[FpArray]:
        for partition in self.partitions:
            yield from partition.scan(chunk)

    def close(self, *, checkpoint: bool = True) -> None:
        for partition in self.partitions:
            partition.close(checkpoint=checkpoint)

    def __len__(self) -> int:
        return sum(len(partition) for partition in self.partitions)


class FingerprintCache:
    """A fixed-size set-associative cache of fingerprints known to be in the set (recent and popular).

    Four ways per set, each with a 2-bit use counter (the four packed in one byte per set): a
    hit raises it, an insertion into the set takes the way with the lowest count (empty first)
    and ages the other ways, CLOCK-like, so that a fingerprint hit again and again outlives a
    stream of one-off ones. Operations are vectorized over a batch with whole-row `take`s (a
    2-D fancy index is several times slower); when two fingerprints of one batch land in the
    same set one insertion may be dropped, which costs a later cache miss, never correctness.
    Zero marks an empty way: the fingerprint 0 is never cached.
    """

    def __init__(self, budget_bytes: int) -> None:
        if budget_bytes < 0:
            raise ValueError("cache budget must be >= 0")
        self.sets = budget_bytes // CACHE_BYTES_PER_SET
        self._keys = np.zeros((self.sets, CACHE_WAYS), np.uint64)
        self._flat_keys = self._keys.reshape(-1)
        self._uses = np.zeros(self.sets, np.uint8)
        self.hits = 0
        self.probes = 0

    def __repr__(self) -> str:
        return f"FingerprintCache({self.capacity} entries, {self.hits}/{self.probes} hits)"

    @property
    def capacity(self) -> int:
        return self.sets * CACHE_WAYS

    @property
    def nbytes(self) -> int:
        return int(self._keys.nbytes + self._uses.nbytes)

    def _set_of(self, fingerprints: FpArray) -> npt.NDArray[np.intp]:
        # a multiplicative mix (fingerprints need not be uniform in tests), then Lemire's multiply-shift:
        # the top 32 bits scaled to [0, sets) without a modulo, for any number of sets
        mixed = (fingerprints * np.uint64(MIX)) >> np.uint64(32)
        return ((mixed * np.uint64(self.sets)) >> np.uint64(32)).astype(np.intp)

    def probe(self, fingerprints: FpArray) -> BoolArray:
        """True where the fingerprint is cached (so certainly in the set); counts a use of each hit."""
        fingerprints = np.asarray(fingerprints, np.uint64)
        hit = np.zeros(fingerprints.size, np.bool_)
        self.probes += int(fingerprints.size)
        if self.sets == 0 or fingerprints.size == 0:
            return hit
        for start in range(0, fingerprints.size, CACHE_PROBE_CHUNK):
            chunk = fingerprints[start : start + CACHE_PROBE_CHUNK]
            sets = self._set_of(chunk)
            matches = np.take(self._keys, sets, axis=0) == chunk[:, None]
            matches &= (chunk != 0)[:, None]
            found = matches.any(axis=1)
            if found.any():
                hit_sets = sets[found]
                shifts = (2 * matches[found].argmax(axis=1)).astype(np.uint8)
                uses = self._uses[hit_sets]
                below_max = ((uses >> shifts) & np.uint8(3)) < HIT_SATURATION
                self._uses[hit_sets] = uses + (below_max.astype(np.uint8) << shifts)
            hit[start : start + chunk.size] = found
        self.hits += int(hit.sum())
        return hit

    def insert(self, fingerprints: FpArray) -> None:
        """Cache fingerprints that are in the set (callers guarantee it) and not cached yet."""
        if self.sets == 0:
            return
        fingerprints = np.asarray(fingerprints, np.uint64)
        fingerprints = fingerprints[fingerprints != 0]
        for start in range(0, fingerprints.size, CACHE_PROBE_CHUNK):
            chunk = fingerprints[start : start + CACHE_PROBE_CHUNK]
            for _ in range(2):  # a second round for those that lost their set to another of the batch
                sets = self._set_of(chunk)
                counts = (self._uses[sets][:, None] >> WAY_SHIFTS) & np.uint8(3)
                occupied = np.take(self._keys, sets, axis=0) != 0
                victims = (counts * np.uint8(2) + occupied).argmin(axis=1)
                np.subtract(counts, 1, out=counts, where=counts > 0)
                counts.reshape(-1)[np.arange(0, counts.size, CACHE_WAYS) + victims] = 1
                self._uses[sets] = (counts << WAY_SHIFTS).sum(axis=1, dtype=np.uint8)
                slots = sets * CACHE_WAYS + victims
                self._flat_keys[slots] = chunk
                chunk = chunk[self._flat_keys[slots] != chunk]
                if chunk.size == 0:
                    break


class RecentFingerprints:
    """Fingerprints seen lately, one per slot of a direct-mapped table (the latest in a slot wins).

    For the link pipeline's test of a page's few dozen links against what it submitted lately: a
    probe is three array operations (4 us for 58 fingerprints), where `FingerprintCache`'s ways and
    use counts take fifteen (17 us), and a page pays it whatever the hits. A miss costs the work a
    repeat needs anyway; a false hit cannot happen (a slot holds the whole fingerprint, 0 marks an
    empty slot and is never reported)."""

    def __init__(self, budget_bytes: int) -> None:
        if budget_bytes < 0:
            raise ValueError("budget must be >= 0")
        bits = (budget_bytes // 8).bit_length() - 1 if budget_bytes >= 16 else 0
        self._slots = np.zeros(1 << bits if bits else 0, np.uint64)
        self._shift = np.uint64(64 - bits)

    def __repr__(self) -> str:
        return f"RecentFingerprints({self._slots.size} slots)"

    @property
    def nbytes(self) -> int:
        return int(self._slots.nbytes)

    def _slot_of(self, fingerprints: FpArray) -> npt.NDArray[np.uint64]:
        return (fingerprints * np.uint64(MIX)) >> self._shift  # the top bits of a multiplicative mix

    def probe(self, fingerprints: FpArray) -> BoolArray:
        """True where the fingerprint is in the table."""
        if not self._slots.size:
            return np.zeros(fingerprints.size, np.bool_)
        found: BoolArray = (self._slots[self._slot_of(fingerprints)] == fingerprints) & (fingerprints != 0)
        return found

    def insert(self, fingerprints: FpArray) -> None:
        if self._slots.size:
            self._slots[self._slot_of(fingerprints)] = fingerprints


class UrlSet(Generic[T]):
    """The URL-seen test: cache, arrival-ordered buffer and batched check against a `FingerprintSet`.

    `submit`/`submit_many` take (fingerprint, entry) pairs; `full` says when to `drain`, which
    returns the entries of fingerprints never seen before, in submission order. `checkpoint`
    makes the set durable; it refuses while entries wait in the buffer (they are in neither the
    set nor the frontier, and a checkpoint would lose them): drain first.
    """

    def __init__(
        self,
        backend: FingerprintSet,
        *,
        cache_bytes: int,
        buffer_urls: int,
        scheme: UrlFingerprints = UrlFingerprints.FLAT,
    ) -> None:
        if buffer_urls < 1:
            raise ValueError("buffer_urls must be at least 1")
        self.backend = backend
        self.scheme = scheme  # how the URLs submitted here were fingerprinted (their owner's business)
        self.cache = FingerprintCache(cache_bytes)
        self.buffer_urls = buffer_urls
        self._fingerprints: list[FpArray] = []
        self._items: list[T] = []
        self.submitted = 0
        self.cache_hits = 0
        self.drains = 0
        self.new = 0

    @classmethod
    def open(
        cls,
        directory: str | Path,
        *,
        cache_bytes: int = 64 << 20,
        buffer_urls: int = 65_536,
        partitions: int = 1,
        reset: bool = False,
        scheme: UrlFingerprints | None = None,
    ) -> UrlSet[T]:
        """A URL set in DIRECTORY (reopened as of its last checkpoint unless `reset`); a new one
        spells fingerprints `scheme` (default HOST_BUCKET), a reopened one as it was made, which
        must be `scheme` when given (the partitions of a crawl share theirs)."""
        scheme = fingerprint_scheme(Path(directory), fresh=reset, expected=scheme)
        memtable_limit = max(buffer_urls, 1024)
        backend: FingerprintSet
        if partitions == 1:
            backend = RunStore(directory, memtable_limit=memtable_limit, reset=reset)
        else:
            backend = PartitionedFingerprintSet.open_local(
                directory, partitions, memtable_limit=memtable_limit, reset=reset
            )
        return cls(backend, cache_bytes=cache_bytes, buffer_urls=buffer_urls, scheme=scheme)

    def __repr__(self) -> str:
        return (
            f"UrlSet({len(self)} seen, {self.pending} pending of {self.buffer_urls}, {self.cache!r}, "
            f"backend={self.backend!r})"
        )

    def __len__(self) -> int:
        """Fingerprints in the set (entries still in the buffer not counted)."""
        return len(self.backend)

    @property
    def pending(self) -> int:
        return len(self._items)

    @property
    def full(self) -> bool:
        return len(self._items) >= self.buffer_urls

    def submit(self, fingerprint: int, item: T) -> bool:
        """Queue one URL; False if the cache already knows it (then it is dropped at once)."""
        return self.submit_many(np.array([fingerprint], np.uint64), [item]) == 1

    def submit_many(self, fingerprints: Sequence[int] | FpArray, items: Sequence[T]) -> int:
        """Queue URLs (fingerprint i belongs to item i); returns how many were buffered, not cache hits."""
        values = np.asarray(fingerprints, dtype=np.uint64)
        if values.ndim != 1 or values.size != len(items):
            raise ValueError(f"{values.size} fingerprints for {len(items)} items")
        self.submitted += int(values.size)
        hit = self.cache.probe(values)
        hits = int(hit.sum())
        self.cache_hits += hits
        if hits == 0:
            self._fingerprints.append(values.copy())
            self._items.extend(items)
        elif hits < values.size:
            keep = np.flatnonzero(~hit)
            self._fingerprints.append(values[keep])
            self._items.extend([items[i] for i in keep.tolist()])
        return int(values.size) - hits

    def drain(self) -> list[T]:
        """Check the buffer in one batch; the entries of new fingerprints, in the order submitted."""
        if not self._items:
            return []
        fingerprints = np.concatenate(self._fingerprints) if len(self._fingerprints) > 1 else self._fingerprints[0]
        items = self._items
        self._fingerprints, self._items = [], []
        order = np.argsort(fingerprints)
        ordered = fingerprints[order]
        run_starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        distinct = ordered[run_starts]
        earliest = np.minimum.reduceat(order, run_starts)  # the first submission of each fingerprint
        new = self.backend.test_and_set(distinct)
        self.cache.insert(distinct)
        positions = np.sort(earliest[new])
        self.drains += 1
        self.new += int(positions.size)
        return [items[i] for i in positions.tolist()]

    def contains(self, fingerprints: Sequence[int] | FpArray) -> BoolArray:
        """Whether each fingerprint is in the set or waits in the buffer (submitted before)."""
        values = np.asarray(fingerprints, dtype=np.uint64)
        order = np.argsort(values)
        ordered = values[order]
        distinct, inverse = np.unique(ordered, return_inverse=True)
        known = self.backend.contains(distinct)[inverse]
        if self._fingerprints:
            known |= np.isin(ordered, np.concatenate(self._fingerprints))
        result = np.empty(values.size, np.bool_)
        result[order] = known
        return result

    def __contains__(self, fingerprint: int) -> bool:
        return bool(self.contains([fingerprint])[0])

    def insert(self, fingerprints: FpArray) -> int:
        """Add fingerprints known to be seen elsewhere (another partition's, handed over when a crawl
        is resized): durable at the next `checkpoint`; returns how many were new here."""
        values = np.unique(np.asarray(fingerprints, np.uint64))
        return int(self.backend.test_and_set(values).sum()) if values.size else 0

    def checkpoint(self) -> None:
        if self._items:
            raise RuntimeError(f"{self.pending} URLs wait in the buffer: drain() before checkpoint()")
        self.backend.checkpoint()

    def close(self, *, checkpoint: bool = True) -> None:
        """Checkpoint and release; refuses (like `checkpoint`) while URLs wait in the buffer. With
        `checkpoint=False` the buffer and what was learnt since the last checkpoint are dropped."""
        if checkpoint:
            self.checkpoint()
        self.backend.close(checkpoint=checkpoint)

    def stats(self) -> dict[str, int]:
        return {
            "urls_seen": len(self),
            "urls_buffered": self.pending,
            "submitted": self.submitted,
            "cache_hits": self.cache_hits,
            "drains": self.drains,
            "new": self.new,
        }


def fingerprint_scheme(directory: Path, *, fresh: bool, expected: UrlFingerprints | None = None) -> UrlFingerprints:
    """How the URL set in `directory` spells fingerprints: recorded (durably) for a new set; a set
    without a record was made before there was a choice (FLAT); an unknown one, or another than
    `expected`, is an error."""
    path = directory / SCHEME_FILE
    if fresh:
        scheme = expected or UrlFingerprints.HOST_BUCKET
        directory.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        with temporary.open("w") as file:
            file.write(scheme.value + "\n")
            file.flush()
            os.fsync(file.fileno())
        temporary.replace(path)
        return scheme
    found = _recorded_scheme(path)
    if expected is not None and found is not expected:
        raise SeenStateError(f"{path}: URL fingerprints {found.value}, but this crawl's are {expected.value}")
    return found


def _recorded_scheme(path: Path) -> UrlFingerprints:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return UrlFingerprints.FLAT
    except (OSError, UnicodeDecodeError) as exc:
        raise SeenStateError(f"{path}: unreadable ({exc})") from None
    try:
        return UrlFingerprints(text)
    except ValueError:
        known = ", ".join(scheme.value for scheme in UrlFingerprints)
        problem = f"URL fingerprints {text!r:.40} unknown to this version (known: {known})"
        raise SeenStateError(f"{path}: {problem}") from None
