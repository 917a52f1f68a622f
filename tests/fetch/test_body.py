"""Bodies in flight: in memory up to the spill size, then in an unnamed file that goes with its result."""

from __future__ import annotations

import asyncio
import os
import tracemalloc
from pathlib import Path

import pytest

from crawlspace.fetch import Outcome
from crawlspace.fetch.body import BodyBuffer, SpilledBytes, payload_parts
from crawlspace.fetch.fetcher import FetchLimits, FetchResult
from tests.fetch.conftest import make_fetcher
from tests.fetch.hostile_server import HostileServer


def chunks(total: int, size: int = 1 << 16) -> list[bytes]:
    return [bytes([n % 251]) * min(size, total - start) for n, start in enumerate(range(0, total, size))]


def test_a_body_within_the_spill_size_stays_bytes_in_memory(tmp_path: Path) -> None:
    buffer = BodyBuffer(1 << 20, tmp_path)
    for chunk in chunks(1 << 20):
        buffer.append(chunk)
    assert buffer.finish() == b"".join(chunks(1 << 20)) and list(tmp_path.iterdir()) == []
    single = BodyBuffer(1 << 20, tmp_path)
    data = b"x" * 1000
    single.append(data)
    assert single.finish() is data  # no copy of a body that came in one piece


def test_a_body_beyond_it_goes_to_an_unnamed_file_read_back_as_needed(tmp_path: Path) -> None:
    expected = b"".join(chunks(5 << 20))
    buffer = BodyBuffer(1 << 20, tmp_path)
    for chunk in chunks(5 << 20):
        buffer.append(chunk)
    spilled = buffer.finish()
    assert isinstance(spilled, SpilledBytes) and buffer.finish() is spilled
    assert len(spilled) == len(expected) == buffer.size
    assert list(tmp_path.iterdir()) == []  # nothing to clean up, even after a crash
    assert spilled.read() == expected and spilled.read(1000) == expected[:1000]
    assert spilled.read(10 << 20) == expected
    assert b"".join(spilled.parts(300_000)) == expected == b"".join(payload_parts(spilled))
    assert max(len(part) for part in payload_parts(spilled)) <= 1 << 20
    spilled.close()
    spilled.close()  # twice is harmless
    with pytest.raises(ValueError, match="after close"):
        spilled.read()


def test_a_spilling_buffer_holds_about_its_spill_size_in_memory(tmp_path: Path) -> None:
    incoming = chunks(8 << 20)
    tracemalloc.start()
    try:
        buffer = BodyBuffer(1 << 20, tmp_path)
        for chunk in incoming:
            buffer.append(chunk)
        spilled = buffer.finish()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(spilled, SpilledBytes) and len(spilled) == 8 << 20
    assert peak < 256 << 10, peak  # the chunks it was given are the caller's: it keeps none of them
    spilled.close()


def test_a_dropped_spill_closes_its_file(tmp_path: Path) -> None:
    buffer = BodyBuffer(1 << 16, tmp_path)
    buffer.append(b"y" * (1 << 17))
    spilled = buffer.finish()
    assert isinstance(spilled, SpilledBytes)
    fd = spilled._fd
    assert fd is not None
    os.fstat(fd)
    del buffer, spilled
    with pytest.raises(OSError):
        os.fstat(fd)


def test_release_closes_the_files_of_a_result(tmp_path: Path) -> None:
    buffer = BodyBuffer(1 << 16, tmp_path)
    buffer.append(b"z" * (1 << 17))
    spilled = buffer.finish()
    assert isinstance(spilled, SpilledBytes)
    result = FetchResult(url="http://a.test/", outcome=Outcome.OK, status=200, body=spilled, decoded=spilled)
    assert result.content() == b"z" * (1 << 17) and result.content(5) == b"zzzzz"
    result.release()
    with pytest.raises(ValueError):
        result.content()
    assert len(result.body) == 1 << 17  # sizes stay for statistics and the crawl table


@pytest.mark.parametrize("kind", ["plain", "chunked", "gzip"])
def test_large_pages_spill_and_read_back_as_they_would_in_memory(tmp_path: Path, kind: str) -> None:
    limits = FetchLimits(max_body_bytes=3 << 20, max_decoded_bytes=3 << 20)

    async def fetch(**options: object) -> FetchResult:
        async with make_fetcher(limits=limits, **options) as fetcher:
            return await fetcher.fetch(server.url(f"/big/{kind}/7"))

    with HostileServer("127.0.0.1") as server:
        spilling = asyncio.run(fetch(spill_bytes=1 << 18, spill_dir=tmp_path))
        in_memory = asyncio.run(fetch())
    assert spilling.outcome is in_memory.outcome is Outcome.TOO_LARGE
    assert spilling.truncated == in_memory.truncated == "length"
    assert isinstance(spilling.body, SpilledBytes) and isinstance(in_memory.body, bytes)
    assert isinstance(spilling.decoded, SpilledBytes)
    assert (spilling.decoded is spilling.body) == (kind != "gzip")
    assert len(spilling.content()) == 3 << 20 == len(in_memory.content())
    assert spilling.content() == in_memory.content() and spilling.content().startswith(b"<html><head><title>big")
    spilled, kept = spilling.body.read(), in_memory.body
    if kind == "gzip":  # reading stops once the decoded limit is reached: where in the stream depends on the reads
        assert spilled[: len(kept)] == kept[: len(spilled)] and min(len(spilled), len(kept)) > 0
    else:
        assert spilled == kept
    assert list(tmp_path.iterdir()) == []
    spilling.release()


def test_a_full_disk_cuts_the_body_where_the_file_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = BodyBuffer(1 << 16, tmp_path)
    buffer.append(b"a" * (1 << 17))
    real_write = os.write

    def full(fd: int, data: bytes | memoryview) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError):
        buffer.append(b"b" * 1000)
    monkeypatch.setattr(os, "write", real_write)
    spilled = buffer.finish()
    assert isinstance(spilled, SpilledBytes) and spilled.read() == b"a" * (1 << 17)
    spilled.close()
