"""The disk-resident sorted fingerprint set under the URL set (Mercator's sorted FP file, as an LSM).

Mercator kept the fingerprints of all URLs seen in one sorted disk file and checked a sorted
buffer of new fingerprints against it in one merge pass; IRLbot's DRUM does the same with
buckets. Rewriting the whole file at every batch costs O(N) writes per batch, so here the
sorted set is a few immutable sorted *runs* (log-structured): a batch is checked by merging it
against each run (reading only the 8 KiB blocks its fingerprints fall in, found through a
sparse in-memory index of every block's first fingerprint), and the batch's new fingerprints
become a new run. Runs of similar size are merged by the batch that tips them over
(size-tiered, fan-in 4; each fingerprint is rewritten about log4(N / batch) times), streaming,
in bounded memory, so that there stay only a handful. Merges write at most 40% of the set
between two checkpoints (the runs they replace are deleted at the next one), so the disk holds
at most 1.4 times the set: 8 bytes per fingerprint at rest, 11.2 at worst (the target is 12).

Layout of a set's directory:
  MANIFEST              JSON: the runs of the last checkpoint (name, count, xxh3 checksum), next file number
  run-00000042.fp       strictly increasing little-endian uint64 fingerprints, nothing else

Crash safety: the MANIFEST is the commit point. A checkpoint writes the in-memory tail as a
run, fsyncs every run not yet synced, writes MANIFEST.tmp, fsyncs it, renames it over
MANIFEST and fsyncs the directory. Files are never rewritten in place; runs that a merge
replaced are deleted only once a MANIFEST that no longer names them is durable. Opening the
directory loads exactly the last checkpoint, deletes files it does not name (written after
it, or by a merge cut short) and verifies each run's size and checksum, so that a torn or
corrupt file is a clear error rather than a silently smaller set.

Memory: the sparse index (8 bytes per 1024 fingerprints, 1/1024 of the disk size), the
in-memory tail (bounded by `memtable_limit`) and fixed read and merge buffers.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

FpArray = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]

MANIFEST = "MANIFEST"
MANIFEST_FORMAT = "crawlspace-fingerprint-runs/1"
RUN_NAME = re.compile(r"^run-(\d{8,})\.fp$")
BLOCK_ENTRIES = 1024
"""Fingerprints per index block: 8 KiB reads, and an index of 1/1024 of the disk size."""
READ_BUFFER_BYTES = 8 << 20
MERGE_BUFFER_BYTES = 32 << 20
MERGE_FAN_IN = 4
MAX_MERGE_SHARE = 0.4
"""A merge writes at most this share of the set, bounding the extra disk it needs meanwhile."""
MAX_RUNS = 24
"""Beyond this many runs the smallest ones are merged whatever their sizes."""

FP_DTYPE = np.dtype("<u8")


class SeenStateError(Exception):
    """A seen set's files on disk are unreadable, torn or corrupt; the message names the file."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    name: str
    count: int
    checksum: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, "xxh3_64": f"{self.checksum:016x}"}

    @classmethod
    def from_json(cls, value: Any, source: Path) -> RunInfo:
        try:
            name, count, checksum = value["name"], int(value["count"]), int(value["xxh3_64"], 16)
        except (KeyError, TypeError, ValueError) as exc:
            raise SeenStateError(f"{source}: malformed run entry {value!r}") from exc
        if not isinstance(name, str) or not RUN_NAME.match(name) or count < 0:
            raise SeenStateError(f"{source}: malformed run entry {value!r}")
        return cls(name, count, checksum)


def _fsync_path(path: Path, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _pread_into(fd: int, buffer: FpArray, offset_entries: int, path: Path) -> None:
    view = buffer.data.cast("B")
    offset = offset_entries * 8
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise SeenStateError(f"{path}: file ended early (truncated while open?)")
        done += got


class _RunWriter:
    """Streams strictly increasing fingerprints into a new run file, building checksum and index."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle = open(path, "xb")  # noqa: SIM115 - closed in finish()/abort()
        self.hasher = xxhash.xxh3_64()
        self.count = 0
        self.last: int | None = None
        self.index_parts: list[FpArray] = []

    def write(self, values: FpArray) -> None:
        if values.size == 0:
            return
        if self.last is not None and int(values[0]) <= self.last:
            raise SeenStateError(f"{self.path}: fingerprints out of order or repeated across runs (corrupt input run)")
        if values.size > 1 and not bool(np.all(values[1:] > values[:-1])):
            raise SeenStateError(f"{self.path}: fingerprints out of order or repeated (corrupt input run)")
        data = np.ascontiguousarray(values, dtype=FP_DTYPE)
        self.index_parts.append(data[(-self.count) % BLOCK_ENTRIES :: BLOCK_ENTRIES].copy())
        self.hasher.update(data.data.cast("B"))
        self.handle.write(data.data.cast("B"))
        self.count += int(data.size)
        self.last = int(data[-1])

    def finish(self) -> Run:
        self.handle.close()
        info = RunInfo(self.path.name, self.count, self.hasher.intdigest())
        index = np.concatenate(self.index_parts) if self.index_parts else np.empty(0, FP_DTYPE)
        return Run(self.path, info, index, synced=False)

    def abort(self) -> None:
        self.handle.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class Run:
    """One immutable sorted run file and its sparse index (first fingerprint of every block)."""

    __slots__ = ("_fd", "index", "info", "path", "synced")

    def __init__(self, path: Path, info: RunInfo, index: FpArray, *, synced: bool) -> None:
        self.path = path
        self.info = info
        self.index = index
        self.synced = synced
        self._fd: int | None = os.open(path, os.O_RDONLY)

    def __repr__(self) -> str:
        return f"Run({self.info.name}, count={self.info.count}, synced={self.synced})"

    @property
    def count(self) -> int:
        return self.info.count

    @classmethod
    def load(cls, path: Path, info: RunInfo, *, verify: bool) -> Run:
        """Open a run named by the manifest, checking its size and (if `verify`) its checksum."""
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise SeenStateError(f"{path}: run named in the manifest is missing") from None
        if size != info.count * 8:
            raise SeenStateError(f"{path}: {size} bytes on disk, the manifest says {info.count * 8} (torn file)")
        run = cls(path, info, np.empty(0, FP_DTYPE), synced=True)
        hasher = xxhash.xxh3_64()
        parts: list[FpArray] = []
        previous: int | None = None
        try:
            for start, chunk in run.chunks(READ_BUFFER_BYTES // 8):
                if verify:
                    hasher.update(chunk.data.cast("B"))
                    ordered = bool(np.all(chunk[1:] > chunk[:-1])) and (previous is None or int(chunk[0]) > previous)
                    if not ordered:
                        raise SeenStateError(f"{path}: fingerprints out of order near entry {start}")
                    previous = int(chunk[-1])
                parts.append(chunk[(-start) % BLOCK_ENTRIES :: BLOCK_ENTRIES].copy())
        except BaseException:
            run.close()
            raise
        if verify and hasher.intdigest() != info.checksum:
            run.close()
            raise SeenStateError(
                f"{path}: checksum {hasher.intdigest():016x} does not match the manifest's {info.checksum:016x}"
            )
        run.index = np.concatenate(parts) if parts else np.empty(0, FP_DTYPE)
        return run

    @property
    def fd(self) -> int:
        if self._fd is None:
            raise ValueError(f"{self.path}: run is closed")
        return self._fd

    def chunks(self, entries: int) -> Iterator[tuple[int, FpArray]]:
        """The whole run, in order, `entries` fingerprints at a time (a fresh array each time)."""
        for start in range(0, self.count, entries):
            chunk = np.empty(min(entries, self.count - start), FP_DTYPE)
            _pread_into(self.fd, chunk, start, self.path)
            yield start, chunk

    def lookup(self, queries: FpArray, scratch: FpArray) -> BoolArray:
        """Which of the sorted, distinct `queries` are in this run: reads only the blocks they fall in."""
        found = np.zeros(queries.size, np.bool_)
        if queries.size == 0 or self.count == 0:
            return found
        blocks = np.searchsorted(self.index, queries, side="right").astype(np.int64) - 1
        first_valid = int(np.searchsorted(blocks, 0))
        if first_valid == queries.size:
            return found
        blocks_hit = blocks[first_valid:]  # sorted, as the queries are
        touched = blocks_hit[np.concatenate(([True], blocks_hit[1:] != blocks_hit[:-1]))]
        # read runs of touched blocks (gaps of a few blocks are read through), at most a buffer at a time
        per_read = max(1, scratch.size // BLOCK_ENTRIES)
        breaks = np.flatnonzero(np.diff(touched) > 4) + 1
        for group in np.split(touched, breaks):
            first_block, end_block = int(group[0]), int(group[-1])
            while True:
                last_block = min(first_block + per_read - 1, end_block)
                lo = int(np.searchsorted(blocks, first_block, side="left"))
                hi = int(np.searchsorted(blocks, last_block, side="right"))
                start = first_block * BLOCK_ENTRIES
                chunk = scratch[: min((last_block + 1) * BLOCK_ENTRIES, self.count) - start]
                _pread_into(self.fd, chunk, start, self.path)
                wanted = queries[lo:hi]
                positions = np.searchsorted(chunk, wanted)
                np.minimum(positions, chunk.size - 1, out=positions)
                found[lo:hi] = chunk[positions] == wanted
                if last_block == end_block:
                    break
                first_block = int(group[np.searchsorted(group, last_block, side="right")])
        return found

    def sync(self) -> None:
        if not self.synced:
            os.fsync(self.fd)
            self.synced = True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _merge_runs(runs: Sequence[Run], writer: _RunWriter) -> None:
    """Stream the union of disjoint sorted runs into `writer`, holding a bounded window of each."""
    chunk_entries = max(BLOCK_ENTRIES, MERGE_BUFFER_BYTES // (16 * len(runs)))
    empty = np.empty(0, FP_DTYPE)
    sources = [run.chunks(chunk_entries) for run in runs]
    windows = [next(source, (0, empty))[1] for source in sources]
    unread = [run.count - window.size for run, window in zip(runs, windows, strict=True)]
    while any(window.size for window in windows):
        # everything up to the smallest last-in-window of the runs with more to come is final
        bounds = [int(window[-1]) for window, more in zip(windows, unread, strict=True) if more > 0]
        bound = np.uint64(min(bounds)) if bounds else None
        parts: list[FpArray] = []
        for i, window in enumerate(windows):
            cut = window.size if bound is None else int(np.searchsorted(window, bound, side="right"))
            parts.append(window[:cut])
            windows[i] = window[cut:]
            if windows[i].size == 0 and unread[i] > 0:
                _, windows[i] = next(sources[i])
                unread[i] -= windows[i].size
        merged = np.concatenate(parts)
        merged.sort(kind="stable")
        writer.write(merged)


class RunStore:
    """A durable sorted fingerprint set: runs on disk, an in-memory sorted tail, and a manifest.

    Batched operations take sorted, distinct fingerprints (`uint64` arrays); `test_and_set`
    is the only writer. Not thread-safe: one owner calls it.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        memtable_limit: int = 1 << 20,
        verify: bool = True,
        reset: bool = False,
    ) -> None:
        if memtable_limit < 1:
            raise ValueError("memtable_limit must be at least 1")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.memtable_limit = memtable_limit
        self._memtable: FpArray = np.empty(0, FP_DTYPE)
        self._scratch: FpArray = np.empty(READ_BUFFER_BYTES // 8, FP_DTYPE)
        self._retired: list[Path] = []
        self._retired_count = 0
        self._closed = False
        if reset:
            self._wipe()
        self._runs, self._next_number = self._load(verify)
        self._durable = {run.info.name for run in self._runs}
        self._count = sum(run.count for run in self._runs)

    def __repr__(self) -> str:
        return (
            f"RunStore({str(self.directory)!r}, count={self._count}, runs={[run.count for run in self._runs]}, "
            f"memtable={self._memtable.size})"
        )

    def __len__(self) -> int:
        return self._count

    @property
    def runs(self) -> list[RunInfo]:
        return [run.info for run in self._runs]

    def disk_bytes(self) -> int:
        """Bytes of every file of the set now on disk (retired runs awaiting a checkpoint included)."""
        return sum(path.stat().st_size for path in self.directory.iterdir() if path.is_file())

    # -- batched operations -------------------------------------------------------------------------

    def contains(self, fingerprints: FpArray) -> BoolArray:
        self._check_open()
        return self._find(_as_sorted_distinct(fingerprints))

    def scan(self, chunk: int = 1 << 17) -> Iterator[FpArray]:
        """Every fingerprint, `chunk` at a time: each run in order, then the in-memory tail (runs
        are disjoint: the set's fingerprints come out once each)."""
        self._check_open()
        for run in list(self._runs):
            for _, values in run.chunks(chunk):
                yield values
        tail = self._memtable
        for start in range(0, tail.size, chunk):
            yield tail[start : start + chunk].copy()

    def test_and_set(self, fingerprints: FpArray) -> BoolArray:
        """Insert sorted distinct fingerprints; True where one was absent before this call."""
        self._check_open()
        queries = _as_sorted_distinct(fingerprints)
        new = ~self._find(queries)
        fresh = queries[new]
        if fresh.size:
            self._memtable = _union_sorted(self._memtable, fresh)
            self._count += int(fresh.size)
            if self._memtable.size >= self.memtable_limit:
                self._spill()
                self._compact()
        return new

    def _find(self, queries: FpArray) -> BoolArray:
        found = np.zeros(queries.size, np.bool_)
        if self._memtable.size and queries.size:
            positions = np.searchsorted(self._memtable, queries)
            np.minimum(positions, self._memtable.size - 1, out=positions)
            found = self._memtable[positions] == queries
        for run in self._runs:
            missing = np.flatnonzero(~found)
            if missing.size == 0:
                break
            found[missing] = run.lookup(queries[missing], self._scratch)
        return found

    # -- durability ---------------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Make the set durable as it is now: after a crash, reopening gives exactly this set."""
        self._check_open()
        if self._memtable.size:
            self._spill()
            self._compact()
        for run in self._runs:
            run.sync()
        manifest = {
            "format": MANIFEST_FORMAT,
            "count": self._count,
            "next": self._next_number,
            "runs": [run.info.to_json() for run in self._runs],
        }
        tmp = self.directory / (MANIFEST + ".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(manifest, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.directory / MANIFEST)
        _fsync_path(self.directory, directory=True)
        self._durable = {run.info.name for run in self._runs}
        for path in self._retired:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self._retired.clear()
        self._retired_count = 0

    def close(self, *, checkpoint: bool = True) -> None:
        """Checkpoint (unless told not to: then the next open sees the last checkpoint) and release files."""
        if self._closed:
            return
        try:
            if checkpoint:
                self.checkpoint()
        finally:
            for run in self._runs:
                run.close()
            self._runs = []
            self._memtable = np.empty(0, FP_DTYPE)
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"fingerprint set {self.directory} is closed")

    # -- runs -----------------------------------------------------------------------------------------

    def _new_path(self) -> Path:
        path = self.directory / f"run-{self._next_number:08d}.fp"
        self._next_number += 1
        return path

    def _spill(self) -> None:
        writer = _RunWriter(self._new_path())
        try:
            writer.write(self._memtable)
        except BaseException:
            writer.abort()
            raise
        self._runs.append(writer.finish())
        self._memtable = np.empty(0, FP_DTYPE)

    def _compact(self) -> None:
        while (chosen := self._choose_merge()) is not None:
            self._merge(chosen)

    def _choose_merge(self) -> list[Run] | None:
        """Size-tiered: FAN_IN runs of one size class (powers of FAN_IN).

        The runs a merge replaces stay on disk until the next checkpoint (a crash must find the
        checkpointed runs), so a merge is allowed only while its output and the replaced runs
        awaiting deletion stay within MAX_MERGE_SHARE of the set, which bounds the disk used.
        """
        if len(self._runs) < MERGE_FAN_IN:
            return None
        by_class: dict[int, list[Run]] = {}
        for run in self._runs:
            size_class = int(np.log(max(run.count, 1)) / np.log(MERGE_FAN_IN))
            by_class.setdefault(size_class, []).append(run)
        limit = MAX_MERGE_SHARE * self._count - self._retired_count
        for size_class in sorted(by_class):
            members = sorted(by_class[size_class], key=lambda run: run.count)[:MERGE_FAN_IN]
            if len(members) == MERGE_FAN_IN and sum(run.count for run in members) <= limit:
                return members
        if len(self._runs) > MAX_RUNS:
            return sorted(self._runs, key=lambda run: run.count)[:MERGE_FAN_IN]
        return None

    def _merge(self, chosen: list[Run]) -> None:
        writer = _RunWriter(self._new_path())
        try:
            _merge_runs(chosen, writer)
        except BaseException:
            writer.abort()
            raise
        merged = writer.finish()
        if merged.count != sum(run.count for run in chosen):
            merged.close()
            raise SeenStateError(f"{merged.path}: merge lost fingerprints (input runs overlap: corrupt set)")
        position = min(self._runs.index(run) for run in chosen)
        survivors = [run for run in self._runs if run not in chosen]
        survivors.insert(position, merged)
        self._runs = survivors
        for run in chosen:
            run.close()
            if run.info.name in self._durable:
                self._retired.append(run.path)
                self._retired_count += run.count
            else:
                run.path.unlink()

    # -- opening --------------------------------------------------------------------------------------

    def _load(self, verify: bool) -> tuple[list[Run], int]:
        path = self.directory / MANIFEST
        if not path.exists():
            self._remove_strays(set())
            return [], 0
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            if manifest.get("format") != MANIFEST_FORMAT:
                raise SeenStateError(f"{path}: not a fingerprint-run manifest (format {manifest.get('format')!r})")
            infos = [RunInfo.from_json(value, path) for value in manifest["runs"]]
            next_number = int(manifest["next"])
            count = int(manifest["count"])
        except (OSError, UnicodeDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SeenStateError(f"{path}: unreadable manifest ({exc})") from exc
        if sum(info.count for info in infos) != count:
            raise SeenStateError(f"{path}: run counts do not add up to the manifest's count {count}")
        self._remove_strays({info.name for info in infos})
        runs: list[Run] = []
        try:
            for info in infos:
                runs.append(Run.load(self.directory / info.name, info, verify=verify))
        except BaseException:
            for run in runs:
                run.close()
            raise
        return runs, next_number

    def _remove_strays(self, named: set[str]) -> None:
        """Delete run files the last checkpoint does not name, and half-written manifests."""
        for path in self.directory.iterdir():
            if (RUN_NAME.match(path.name) and path.name not in named) or path.name == MANIFEST + ".tmp":
                path.unlink()

    def _wipe(self) -> None:
        remove_runs(self.directory)


def remove_runs(directory: Path) -> None:
    """Every file of the run store in `directory` goes, the manifest first: a crash part-way leaves an empty
    set, never a manifest naming a run already deleted (a set that cannot be opened)."""
    manifest = directory / MANIFEST
    if manifest.exists():
        manifest.unlink()
        _fsync_path(directory, directory=True)
    for path in directory.iterdir():
        if RUN_NAME.match(path.name) or path.name in (MANIFEST, MANIFEST + ".tmp"):
            path.unlink()


def _as_sorted_distinct(fingerprints: FpArray) -> FpArray:
    values = np.asarray(fingerprints, dtype=np.uint64)
    if values.ndim != 1:
        raise ValueError("fingerprints must be a one-dimensional array")
    if values.size > 1 and not bool(np.all(values[1:] > values[:-1])):
        raise ValueError("fingerprints must be sorted and distinct")
    return values


def _union_sorted(left: FpArray, right: FpArray) -> FpArray:
    """Union of two disjoint sorted arrays, sorted."""
    if left.size == 0:
        return right.copy()
    out = np.empty(left.size + right.size, np.uint64)
    positions = np.searchsorted(left, right) + np.arange(right.size)
    mask = np.ones(out.size, np.bool_)
    mask[positions] = False
    out[positions] = right
    out[mask] = left
    return out
