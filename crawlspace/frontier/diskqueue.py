"""Disk-backed FIFO queues: a bounded in-memory window at each end, compressed blocks in between.

IIR §20.2.3: "a portion of each queue is kept in memory, with more brought in from disk as it is
drained". A `DiskQueue` is `head` (entries about to be popped, in memory) + `blocks` (references to
compressed blocks on disk, oldest first) + `tail` (the newest entries, in memory). When the tail
reaches its spill size it is written out as one block; when the head runs dry the oldest block is
read back whole. The spill size starts at `window` and doubles with every block the queue already
has on disk, up to `max_block`: a queue that stays long (a big site's back queue) writes fewer,
larger blocks, so the block references held in memory stay few even at 100 M URLs. A queue thus
holds at most about 2 x max_block entries in memory however long it is, and a short queue (most
back queues) never touches the disk at all.

Blocks are msgpack arrays of entries compressed as one zstd frame with a content checksum (~11
bytes per URL on typical URLs, against ~60 raw). Each queue appends its blocks to its own current
segment file and rotates it past `file_bytes`; `SegmentLog` counts the live blocks of every file
and deletes a file when its last block has been consumed, except that files the last checkpoint
refers to are kept until the next checkpoint commits, so a crash can always go back to it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

import msgspec
import zstandard

from crawlspace.frontier.entry import FrontierEntry
from crawlspace.frontier.store import CorruptSegment, SegmentStore

BlockRef = tuple[int, int, int, int]  # file id, offset, length in bytes, entries

_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(list[FrontierEntry])


class SegmentLog:
    """Shared by all queues of one frontier: block codec, file ids, live-block counts, deletion."""

    def __init__(self, store: SegmentStore, *, level: int = 3, next_file_id: int = 1) -> None:
        self.store = store
        self.next_file_id = next_file_id
        self.live: dict[int, int] = {}  # file id -> blocks not yet consumed
        self.writing: set[int] = set()  # files some queue still appends to
        # Files the last two durable checkpoints refer to: the previous one is the fallback when the
        # newest is damaged, so its blocks must outlive one more checkpoint.
        self.pinned: set[int] = set()
        self._pinned_last: set[int] = set()
        self.doomed: set[int] = set()  # dead since the last checkpoint, but pinned
        self._doomed_earlier: set[int] = set()  # dead before it: free once the next one is durable
        self.dirty: set[int] = set()  # appended to since the last sync
        self.lost_entries = 0  # entries of blocks that could not be read back
        self.problems: list[str] = []  # the last few corruption messages, for the operator
        self._compressor = zstandard.ZstdCompressor(level=level, write_checksum=True)
        self._decompressor = zstandard.ZstdDecompressor()

    def new_file(self) -> int:
        file_id = self.next_file_id
        self.next_file_id += 1
        self.writing.add(file_id)
        self.live[file_id] = 0
        return file_id

    def write(self, file_id: int, entries: list[FrontierEntry]) -> BlockRef:
        data = self._compressor.compress(_ENCODER.encode(entries))
        offset = self.store.append(file_id, data)
        self.live[file_id] += 1
        self.dirty.add(file_id)
        return (file_id, offset, len(data), len(entries))

    def read(self, ref: BlockRef) -> list[FrontierEntry]:
        """The entries of a block, or raise CorruptSegment (the caller accounts for the loss)."""
        file_id, offset, length, count = ref
        data = self.store.read(file_id, offset, length)
        try:
            entries = _DECODER.decode(self._decompressor.decompress(data))
        except (zstandard.ZstdError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise CorruptSegment(f"segment {file_id}: block at {offset}+{length} is unreadable: {exc}") from None
        if len(entries) != count:
            raise CorruptSegment(f"segment {file_id}: block at {offset} has {len(entries)} entries, expected {count}")
        return entries

    def consumed(self, ref: BlockRef) -> None:
        file_id = ref[0]
        left = self.live[file_id] - 1
        self.live[file_id] = left
        if left == 0 and file_id not in self.writing:
            self._dead(file_id)

    def finish_file(self, file_id: int) -> None:
        """The queue writing `file_id` moved on (rotation, or the queue went away)."""
        self.writing.discard(file_id)
        if self.live.get(file_id) == 0:
            self._dead(file_id)

    def _dead(self, file_id: int) -> None:
        del self.live[file_id]
        self.dirty.discard(file_id)
        if file_id in self.pinned:
            self.doomed.add(file_id)
        else:
            self.store.delete(file_id)

    def lost(self, ref: BlockRef, problem: str) -> None:
        self.lost_entries += ref[3]
        self.problems = [*self.problems[-9:], problem]

    # -- durability -------------------------------------------------------------------------

    def sync(self) -> None:
        self.store.sync(sorted(self.dirty))
        self.dirty.clear()

    def committed(self, referenced: Iterable[int]) -> None:
        """A checkpoint referring to exactly the files `referenced` is durable: the one before it
        becomes the fallback, and files only older checkpoints needed are deleted."""
        for file_id in sorted(self._doomed_earlier - self.pinned_by_last_two(referenced)):
            self.store.delete(file_id)
        self._doomed_earlier = self.doomed
        self.doomed = set()
        self.pinned = self.pinned_by_last_two(referenced)
        self._pinned_last = set(referenced)

    def pinned_by_last_two(self, referenced: Iterable[int]) -> set[int]:
        return set(referenced) | self._pinned_last

    def adopt(self, refs: Iterable[BlockRef], fallback_files: Iterable[int] = ()) -> None:
        """Count the blocks of a restored checkpoint; pin their files, and those of the fallback
        checkpoint before it, until the next checkpoints make them unnecessary."""
        for file_id, _offset, _length, _count in refs:
            self.live[file_id] = self.live.get(file_id, 0) + 1
        self._pinned_last = set(self.live)
        self.pinned = set(self.live) | set(fallback_files)
        self._doomed_earlier = set(fallback_files) - self._pinned_last


class DiskQueue:
    """One FIFO queue of the frontier (front or back); see the module docstring for its layout."""

    __slots__ = (
        "blocks",
        "file_bytes",
        "head",
        "log",
        "max_block",
        "size",
        "spill_at",
        "tail",
        "window",
        "write_file",
        "written",
    )

    def __init__(self, log: SegmentLog, window: int, file_bytes: int, max_block: int | None = None) -> None:
        self.log = log
        self.window = window
        self.max_block = max(window, max_block or window)
        self.spill_at = window
        self.file_bytes = file_bytes
        self.head: deque[FrontierEntry] = deque()
        self.blocks: deque[BlockRef] = deque()
        self.tail: list[FrontierEntry] = []
        self.size = 0
        self.write_file = 0  # 0: none yet
        self.written = 0  # bytes appended to write_file

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"DiskQueue(size={self.size}, head={len(self.head)}, blocks={len(self.blocks)}, tail={len(self.tail)})"

    def push(self, entry: FrontierEntry) -> None:
        self.size += 1
        tail = self.tail
        if not tail and not self.blocks and len(self.head) < self.window:
            self.head.append(entry)  # nothing queued behind the head: a short queue stays in one deque
            return
        tail.append(entry)
        if len(tail) >= self.spill_at:
            self.spill_tail()

    def push_front(self, entry: FrontierEntry) -> None:
        """Put an entry back at the head (a lease returned unfetched); may exceed the window by
        the number of leases a host can hold, which is small."""
        self.head.appendleft(entry)
        self.size += 1

    def pop(self) -> FrontierEntry | None:
        head = self.head
        if not head:
            self._refill_head()
            head = self.head
            if not head:
                return None
        self.size -= 1
        return head.popleft()

    def peek(self) -> FrontierEntry | None:
        if not self.head:
            self._refill_head()
        return self.head[0] if self.head else None

    def _refill_head(self) -> None:
        log = self.log
        while self.blocks:
            ref = self.blocks.popleft()
            try:
                entries = log.read(ref)
            except CorruptSegment as exc:
                log.lost(ref, str(exc))
                log.consumed(ref)
                self.size -= ref[3]
                continue
            log.consumed(ref)
            self.head = deque(entries)
            return
        self.spill_at = self.window  # nothing left on disk: start small again
        if self.tail:
            self.head = deque(self.tail)
            self.tail = []

    def spill_tail(self) -> None:
        tail = self.tail
        if not tail:
            return
        if not self.blocks and not self.head:
            self.head = deque(tail)  # nothing in between: no need to go through the disk
        else:
            self.blocks.append(self._write(tail))
            if self.spill_at < self.max_block:
                self.spill_at = min(2 * self.spill_at, self.max_block)
        self.tail = []

    def spill_all(self) -> None:
        """Move every in-memory entry to disk (a parked host keeps only its bookkeeping in RAM)."""
        if self.head:
            self.blocks.appendleft(self._write(list(self.head)))
            self.head = deque()
        if self.tail:
            self.blocks.append(self._write(self.tail))
            self.tail = []
        self.close()

    def _write(self, entries: list[FrontierEntry]) -> BlockRef:
        log = self.log
        if self.write_file == 0 or self.written >= self.file_bytes:
            if self.write_file:
                log.finish_file(self.write_file)
            self.write_file = log.new_file()
            self.written = 0
        ref = log.write(self.write_file, entries)
        self.written += ref[2]
        return ref

    def close(self) -> None:
        """Stop appending to the current file (the queue is parked, emptied or discarded)."""
        if self.write_file:
            self.log.finish_file(self.write_file)
            self.write_file = 0
            self.written = 0

    def discard(self) -> int:
        """Drop every entry (the host was given up); returns how many there were."""
        dropped = self.size
        for ref in self.blocks:
            self.log.consumed(ref)
        self.blocks.clear()
        self.head = deque()
        self.tail = []
        self.size = 0
        self.spill_at = self.window
        self.close()
        return dropped

    def in_memory(self) -> int:
        return len(self.head) + len(self.tail)

    def entries(self) -> Iterator[FrontierEntry]:
        """Every entry in queue order, reading the blocks on disk without consuming them (a block
        that cannot be read is skipped: `pop` would count it lost)."""
        yield from self.head
        for ref in self.blocks:
            try:
                yield from self.log.read(ref)
            except CorruptSegment:
                continue
        yield from self.tail

    def entries_in_memory(self) -> Iterable[FrontierEntry]:
        yield from self.head
        yield from self.tail
