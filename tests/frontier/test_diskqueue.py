"""Disk-backed queues and the segment stores: FIFO through windows and blocks, bounded memory,
file lifetimes around checkpoints, corruption reported and counted, the directory lock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crawlspace.frontier.diskqueue import DiskQueue, SegmentLog
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.frontier.store import CorruptSegment, DirectoryStore, FrontierStoreError, MemoryStore


def entries(n: int, start: int = 0) -> list[FrontierEntry]:
    return [FrontierEntry(f"http://h.test/{i}", i % 5, i % 2) for i in range(start, start + n)]


def drain(queue: DiskQueue) -> list[FrontierEntry]:
    out = []
    while (entry := queue.pop()) is not None:
        out.append(entry)
    return out


@pytest.mark.parametrize("window", [1, 2, 7, 1000])
def test_fifo_through_windows_and_blocks(window: int) -> None:
    log = SegmentLog(MemoryStore())
    queue = DiskQueue(log, window, file_bytes=500)
    items = entries(100)
    peak = 0
    for item in items[:60]:
        queue.push(item)
        peak = max(peak, queue.in_memory())
    got = [queue.pop() for _ in range(10)]
    for item in items[60:]:
        queue.push(item)
        peak = max(peak, queue.in_memory())
    assert len(queue) == 90
    got += drain(queue)
    assert got == items
    assert peak <= 2 * window
    assert len(queue) == 0 and queue.pop() is None


def test_short_queue_never_touches_the_disk() -> None:
    store = MemoryStore()
    queue = DiskQueue(SegmentLog(store), 64, file_bytes=1 << 20)
    for item in entries(40):
        queue.push(item)
    assert drain(queue) == entries(40)
    assert store.files == {}


def test_long_queue_keeps_a_bounded_window_in_memory() -> None:
    store = MemoryStore()
    queue = DiskQueue(SegmentLog(store), 16, file_bytes=4096)
    for item in entries(5000):
        queue.push(item)
    assert queue.in_memory() <= 32
    assert len(store.files) > 1, "long queues rotate their segment files"
    assert drain(queue) == entries(5000)


def test_a_long_queue_writes_growing_blocks_within_its_bound() -> None:
    queue = DiskQueue(SegmentLog(MemoryStore()), 4, file_bytes=1 << 16, max_block=32)
    peak = 0
    for item in entries(10_000):
        queue.push(item)
        peak = max(peak, queue.in_memory())
    assert peak <= 64
    assert len(queue.blocks) < 10_000 / 30, "block references stay few: blocks grew to max_block"
    assert drain(queue) == entries(10_000)
    for item in entries(3):  # emptied: short again, in memory
        queue.push(item)
    assert queue.spill_at == 4 and not queue.blocks


def test_consumed_files_are_deleted_and_blocks_are_compressed() -> None:
    store = MemoryStore()
    log = SegmentLog(store)
    queue = DiskQueue(log, 100, file_bytes=2000)
    for item in entries(3000):
        queue.push(item)
    raw = sum(len(e.url) for e in entries(3000))
    assert store.disk_bytes() < raw / 2
    half = [queue.pop() for _ in range(1500)]
    assert half == entries(1500)
    files_half = len(store.files)
    drain(queue)
    assert len(store.files) < files_half
    queue.close()
    assert store.files == {}


def test_push_front_spill_all_and_discard() -> None:
    log = SegmentLog(MemoryStore())
    queue = DiskQueue(log, 4, file_bytes=1 << 20)
    items = entries(10)
    for item in items:
        queue.push(item)
    first = queue.pop()
    assert first == items[0]
    queue.push_front(first)
    queue.spill_all()
    assert queue.in_memory() == 0
    assert drain(queue) == items
    for item in items:
        queue.push(item)
    assert queue.discard() == 10
    assert len(queue) == 0 and queue.pop() is None
    assert log.live == {} or all(count == 0 for count in log.live.values())


def test_files_of_the_last_two_checkpoints_survive() -> None:
    store = MemoryStore()
    log = SegmentLog(store)
    queue = DiskQueue(log, 10, file_bytes=100)
    for item in entries(100):
        queue.push(item)
    log.sync()
    log.committed(set(log.live))
    referenced = set(store.files)
    drain(queue)
    queue.close()
    assert referenced <= set(store.files), "files a checkpoint refers to were deleted before the next one"
    log.committed(set())
    assert referenced <= set(store.files), "the previous checkpoint is the fallback: its files must stay"
    log.committed(set())
    assert store.files == {}


def test_corrupt_block_is_skipped_and_counted() -> None:
    store = MemoryStore()
    log = SegmentLog(store)
    queue = DiskQueue(log, 10, file_bytes=1 << 20)
    items = entries(40)
    for item in items:
        queue.push(item)
    file_id, offset, _length, _count = queue.blocks[0]
    store.files[file_id][offset + 20] ^= 0xFF
    got = drain(queue)
    assert got == items[:10] + items[20:]
    assert log.lost_entries == 10
    assert "unreadable" in log.problems[-1]


def test_directory_store_round_trip_and_atomic_state(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "f")
    first = store.append(5, b"hello")
    second = store.append(5, b"world!")
    assert (first, second) == (0, 5)
    assert store.read(5, 5, 6) == b"world!"
    with pytest.raises(CorruptSegment):
        store.read(5, 8, 10)
    with pytest.raises(CorruptSegment):
        store.read(6, 0, 1)
    store.sync([5])
    store.write_state(b"state-1")
    store.write_state(b"state-2")
    assert store.read_state() == b"state-2"
    assert not (tmp_path / "f" / "frontier.state.tmp").exists()
    assert store.file_ids() == {5}
    store.append(5000, b"x")
    assert store.file_ids() == {5, 5000}
    store.delete(5)
    assert store.file_ids() == {5000}
    store.close()
    again = DirectoryStore(tmp_path / "f")
    assert again.read_state() == b"state-2"
    assert again.read(5000, 0, 1) == b"x"
    again.close()
    fresh = DirectoryStore(tmp_path / "f", fresh=True)
    assert fresh.read_state() is None and fresh.file_ids() == set()
    fresh.close()


def test_directory_store_is_locked_against_a_second_process(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            DirectoryStore(tmp_path)
        except FrontierStoreError:
            os._exit(0)
        os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, "a second process opened a locked frontier directory"
    store.close()
    DirectoryStore(tmp_path).close()


def test_unusable_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(FrontierStoreError, match="cannot use frontier directory"):
        DirectoryStore(blocker / "frontier")
