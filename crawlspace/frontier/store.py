"""The frontier's only door to the disk: numbered append-only segment files and one state file.

Everything the frontier decides is pure logic over in-memory structures; the bytes it keeps on
disk go through the narrow `SegmentStore` protocol below, so the scheduling code is tested
against `MemoryStore` (fast, deterministic, can simulate a crash by being reused) and runs on
`DirectoryStore` in a crawl. Segment files are only ever appended to, read at known offsets and
deleted whole; the state file is replaced atomically (write, fsync, rename, fsync directory).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from crawlspace.durable import fsync_directory

STATE_NAME = "frontier.state"
PREVIOUS_STATE_NAME = "frontier.state.prev"
SEGMENTS_DIR = "segments"
LOCK_NAME = "lock"
FILES_PER_SHARD_BITS = 12  # 4096 segment files per subdirectory


class FrontierStoreError(Exception):
    """The frontier's directory cannot be used: locked by another process, unreadable, not ours."""


class CorruptSegment(Exception):
    """A block of a segment file is missing or fails its checksum."""


class SegmentStore(Protocol):
    """Append-only numbered files plus one atomically replaced state blob.

    Implementers guarantee: `append` returns the offset at which `data` starts and never moves
    bytes already written; `read` returns exactly the bytes appended there or raises
    CorruptSegment; after `sync(ids)` those files' bytes survive a crash; `write_state` is atomic
    (a crash leaves the old state or the new one, never a mix) and durable when it returns, and the
    state it replaces stays readable through `read_previous_state` (the fallback when the newest
    one turns out to be damaged).
    """

    def append(self, file_id: int, data: bytes) -> int: ...

    def read(self, file_id: int, offset: int, length: int) -> bytes: ...

    def delete(self, file_id: int) -> None: ...

    def sync(self, file_ids: Iterable[int]) -> None: ...

    def file_ids(self) -> set[int]: ...

    def write_state(self, data: bytes) -> None: ...

    def read_state(self) -> bytes | None: ...

    def read_previous_state(self) -> bytes | None: ...

    def state_name(self) -> str: ...

    def disk_bytes(self) -> int: ...

    def close(self) -> None: ...


class MemoryStore:
    """A SegmentStore in RAM: for tests and throwaway frontiers. Reusing the object after the
    frontier that wrote it is dropped (without `close`) is how tests simulate a crash: only what
    was checkpointed with `write_state` is trusted, unsynced appends may be kept or not."""

    def __init__(self) -> None:
        self.files: dict[int, bytearray] = {}
        self.state: bytes | None = None
        self.previous_state: bytes | None = None
        self.syncs = 0

    def append(self, file_id: int, data: bytes) -> int:
        buffer = self.files.setdefault(file_id, bytearray())
        offset = len(buffer)
        buffer += data
        return offset

    def read(self, file_id: int, offset: int, length: int) -> bytes:
        buffer = self.files.get(file_id)
        if buffer is None or offset + length > len(buffer):
            raise CorruptSegment(f"segment {file_id}: block at {offset}+{length} is missing")
        return bytes(buffer[offset : offset + length])

    def delete(self, file_id: int) -> None:
        self.files.pop(file_id, None)

    def sync(self, file_ids: Iterable[int]) -> None:
        self.syncs += 1

    def file_ids(self) -> set[int]:
        return set(self.files)

    def write_state(self, data: bytes) -> None:
        self.previous_state = self.state
        self.state = bytes(data)

    def read_state(self) -> bytes | None:
        return self.state

    def read_previous_state(self) -> bytes | None:
        return self.previous_state

    def state_name(self) -> str:
        return "<memory>"

    def disk_bytes(self) -> int:
        return sum(len(buffer) for buffer in self.files.values()) + len(self.state or b"")

    def close(self) -> None:
        pass


class DirectoryStore:
    """A SegmentStore in a directory: `segments/<shard>/<id>.seg` files and `frontier.state`.

    One process at a time: an exclusive flock on `lock` is held from construction to `close`, so
    a second crawler pointed at the same directory fails fast instead of corrupting the queues.
    Files are opened per operation (appends are whole compressed blocks of many URLs, so the
    open/close is amortized) to keep the number of descriptors independent of the queue count.
    """

    def __init__(self, directory: str | Path, *, fresh: bool = False) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise FrontierStoreError(f"cannot use frontier directory {self.directory}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            raise FrontierStoreError(
                f"frontier directory {self.directory} is in use by another frontier (another crawl, or one "
                f"not closed; lock held on {LOCK_NAME})"
            ) from None
        self._segments = self.directory / SEGMENTS_DIR
        if fresh:
            shutil.rmtree(self._segments, ignore_errors=True)
            for name in (STATE_NAME, STATE_NAME + ".tmp", PREVIOUS_STATE_NAME):
                with contextlib.suppress(FileNotFoundError):
                    (self.directory / name).unlink()
        self._segments.mkdir(exist_ok=True)
        self._sizes: dict[int, int] = {}
        self._shards: set[int] = {int(p.name, 16) for p in self._segments.iterdir() if _is_hex(p.name)}
        self._new_shards: set[int] = set()
        self._closed = False

    def _path(self, file_id: int) -> Path:
        return self._segments / f"{file_id >> FILES_PER_SHARD_BITS:05x}" / f"{file_id:08x}.seg"

    def append(self, file_id: int, data: bytes) -> int:
        offset = self._sizes.get(file_id)
        flags = os.O_WRONLY | os.O_APPEND
        if offset is None:
            shard = file_id >> FILES_PER_SHARD_BITS
            if shard not in self._shards:
                (self._segments / f"{shard:05x}").mkdir(exist_ok=True)
                self._shards.add(shard)
                self._new_shards.add(shard)
            flags |= os.O_CREAT | os.O_TRUNC
            offset = 0
        fd = os.open(self._path(file_id), flags, 0o644)
        try:
            written = os.write(fd, data)
            while written < len(data):
                written += os.write(fd, data[written:])
        finally:
            os.close(fd)
        self._sizes[file_id] = offset + len(data)
        return offset

    def read(self, file_id: int, offset: int, length: int) -> bytes:
        try:
            fd = os.open(self._path(file_id), os.O_RDONLY)
        except OSError as exc:
            raise CorruptSegment(f"segment {file_id}: {exc.strerror or exc}") from None
        try:
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        if len(data) != length:
            raise CorruptSegment(f"segment {file_id}: block at {offset}+{length} is truncated ({len(data)} bytes)")
        return data

    def delete(self, file_id: int) -> None:
        self._sizes.pop(file_id, None)
        with contextlib.suppress(FileNotFoundError):
            self._path(file_id).unlink()

    def sync(self, file_ids: Iterable[int]) -> None:
        for file_id in file_ids:
            try:
                fd = os.open(self._path(file_id), os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        for shard in sorted(self._new_shards):
            fsync_directory(self._segments / f"{shard:05x}")
        if self._new_shards:
            fsync_directory(self._segments)
            self._new_shards.clear()

    def file_ids(self) -> set[int]:
        ids: set[int] = set()
        for shard in self._segments.iterdir():
            if shard.is_dir() and _is_hex(shard.name):
                ids.update(int(p.stem, 16) for p in shard.iterdir() if p.suffix == ".seg" and _is_hex(p.stem))
        return ids

    def write_state(self, data: bytes) -> None:
        final = self.directory / STATE_NAME
        tmp = self.directory / (STATE_NAME + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):  # a crash right here leaves only the previous one: fine
            os.replace(final, self.directory / PREVIOUS_STATE_NAME)
        os.replace(tmp, final)
        fsync_directory(self.directory)

    def read_state(self) -> bytes | None:
        return self._read(STATE_NAME)

    def read_previous_state(self) -> bytes | None:
        return self._read(PREVIOUS_STATE_NAME)

    def state_name(self) -> str:
        return str(self.directory / STATE_NAME)

    def _read(self, name: str) -> bytes | None:
        try:
            return (self.directory / name).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FrontierStoreError(f"cannot read {self.directory / name}: {exc.strerror or exc}") from None

    def disk_bytes(self) -> int:
        total = 0
        for root, _dirs, files in os.walk(self.directory):
            for name in files:
                with contextlib.suppress(FileNotFoundError):
                    total += os.stat(os.path.join(root, name)).st_blocks * 512
        return total

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)


def _is_hex(text: str) -> bool:
    try:
        int(text, 16)
    except ValueError:
        return False
    return True
