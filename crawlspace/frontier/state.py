"""The frontier's checkpoint format: what survives close and reopen, as msgspec Structs.

Times are stored relative to the clock at checkpoint time (`t - saved_at`), because the frontier's
clock is monotonic and means nothing in another process: a host that had 3 s to wait waits 3 s
after the reopen. Heap entries are stored with their sequence numbers, so the reopened heaps pop
in exactly the same order. The blob is msgpack compressed with zstd (with a checksum), written
through `SegmentStore.write_state` (write, fsync, rename).
"""

from __future__ import annotations

import msgspec
import zstandard

from crawlspace.frontier.diskqueue import BlockRef
from crawlspace.frontier.entry import FrontierEntry

FORMAT = "crawlspace-frontier"
VERSION = 1


class FrontierStateError(Exception):
    """A checkpoint that cannot be restored (corrupt, another format, incompatible settings)."""


class QueueRecord(msgspec.Struct, array_like=True, frozen=True):
    head: list[FrontierEntry]
    blocks: list[BlockRef]
    tail: list[FrontierEntry]
    size: int


class HostRecord(msgspec.Struct, array_like=True, frozen=True):
    name: str
    status: int
    t_e: float  # relative
    crawl_delay: float
    failures: int
    parks: int
    address: str | None
    address_known: bool
    heap_seq: int  # live entry in its group's heap (key t_e), 0: none
    park_seq: int  # live entry in the parked heap, 0: none
    park_key: float  # relative
    queue: QueueRecord | None
    leased: list[FrontierEntry]  # out at checkpoint time: handed out again after a reopen


class GroupRecord(msgspec.Struct, array_like=True, frozen=True):
    key: str
    shared: bool
    t_e: float  # relative
    entry_seq: int
    key_time: float  # relative


class FrontierRecord(msgspec.Struct, frozen=True):
    format: str
    version: int
    levels: int
    per_ip: bool
    seq: int
    next_file_id: int
    rng_state: list[object]
    front: list[QueueRecord]
    hosts: list[HostRecord]
    groups: list[GroupRecord]  # shared (IP) groups and the own groups of hosts that have a heap entry
    stats: dict[str, int]
    given_up_reasons: dict[str, int]
    extra: bytes = b""  # the caller's own state, committed atomically with the frontier's (crawl checkpoint)


def encode(record: FrontierRecord) -> bytes:
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    return compressor.compress(msgspec.msgpack.encode(record))


def referenced_files(record: FrontierRecord) -> set[int]:
    """Segment files whose blocks a checkpoint refers to."""
    files = {ref[0] for queue in record.front for ref in queue.blocks}
    files.update(ref[0] for host in record.hosts if host.queue is not None for ref in host.queue.blocks)
    return files


def decode(data: bytes) -> FrontierRecord:
    try:
        raw = zstandard.ZstdDecompressor().decompress(data)
        record = msgspec.msgpack.decode(raw, type=FrontierRecord)
    except (zstandard.ZstdError, msgspec.DecodeError) as exc:
        raise FrontierStateError(f"frontier checkpoint is corrupt: {exc}") from None
    except msgspec.ValidationError as exc:
        raise FrontierStateError(f"frontier checkpoint has an unexpected layout: {exc}") from None
    if record.format != FORMAT or record.version != VERSION:
        raise FrontierStateError(
            f"frontier checkpoint is {record.format} v{record.version}, this crawlspace reads {FORMAT} v{VERSION}"
        )
    return record
