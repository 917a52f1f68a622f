"""Response bodies as they arrive: in memory while small, in an unnamed temporary file beyond a size.

Why: a fetch keeps its body, and the decoded content beside it when there is a Content-Encoding,
until its page is processed; fetches are in flight by the dozen or hundred while pages are
processed one at a time, so in memory 50 fetches of 10 MiB pages held 500 MB to 800 MB before the
first of them was parsed. A `BodyBuffer` keeps at most `spill_bytes` in memory: beyond, all its
bytes go to an unnamed temporary file (O_TMPFILE where the system has it: no name, nothing to
clean up after a crash) in the given directory (the crawl directory: /tmp is often a RAM disk),
and the fetch ends with a `SpilledBytes` in place of `bytes`. Each consumer reads it as it needs
it when the page's turn comes: the WARC writer in parts of PART_BYTES, the parser whole; `close`
(or, as a last resort, garbage collection) frees the file. Writes go to the page cache and are
never synced: the file only has to live as long as its fetch result.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

PART_BYTES = 1 << 20


class SpilledBytes:
    """Bytes kept in an unnamed temporary file: a body too large to hold while its fetch was in flight."""

    __slots__ = ("_fd", "size")

    def __init__(self, fd: int, size: int) -> None:
        self._fd: int | None = fd
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        state = "closed" if self._fd is None else f"fd={self._fd}"
        return f"<SpilledBytes {self.size} bytes {state}>"

    def _open_fd(self) -> int:
        if self._fd is None:
            raise ValueError("SpilledBytes used after close()")
        return self._fd

    def read(self, max_bytes: int | None = None) -> bytes:
        """The first `max_bytes` bytes (all of them by default), as one bytes object."""
        size = self.size if max_bytes is None else min(max_bytes, self.size)
        return self._pread(size, 0)

    def parts(self, size: int = PART_BYTES) -> Iterator[bytes]:
        """All the bytes, in order, at most `size` of them at a time."""
        for offset in range(0, self.size, size):
            yield self._pread(min(size, self.size - offset), offset)

    def _pread(self, size: int, offset: int) -> bytes:
        fd = self._open_fd()
        data = os.pread(fd, size, offset)
        if len(data) == size:  # one read, one copy: the usual case for a regular file
            return data
        pieces = [data]
        done = len(data)
        while done < size:
            piece = os.pread(fd, size - done, offset + done)
            if not piece:
                raise OSError(f"spilled body ends at {offset + done} bytes, expected {offset + size}")
            pieces.append(piece)
            done += len(piece)
        return b"".join(pieces)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __del__(self) -> None:  # a result dropped without close(): the file must not outlive it
        self.close()


Payload = bytes | SpilledBytes
"""A body or decoded content: in memory, or spilled to a file."""


def payload_parts(payload: Payload) -> Iterator[bytes]:
    """The bytes of a payload in order, in parts of at most PART_BYTES when it is spilled."""
    if isinstance(payload, SpilledBytes):
        yield from payload.parts()
    elif payload:
        yield payload


class BodyBuffer:
    """Bytes appended as a body arrives: in memory up to `spill_bytes`, then all in a temporary file.

    `spill_bytes` None keeps everything in memory (a fetcher without a spill directory does)."""

    __slots__ = ("_chunks", "_directory", "_spilled", "size", "spill_bytes")

    def __init__(self, spill_bytes: int | None = None, directory: str | Path | None = None) -> None:
        self.spill_bytes = spill_bytes
        self._directory = directory
        self._chunks: list[bytes] = []
        self._spilled: SpilledBytes | None = None  # once the bytes are in a file: the file
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        where = "in memory" if self._spilled is None else "spilled"
        return f"<BodyBuffer {self.size} bytes {where}>"

    def append(self, data: bytes) -> None:
        """Add bytes. `size` counts only what is held: if a write to the file fails (a full disk), the
        body is cut where the file ends and the error goes to the caller."""
        if not data:
            return
        if self._spilled is not None:
            self._write(self._spilled, data)
            self.size += len(data)
            return
        self._chunks.append(data)
        self.size += len(data)
        if self.spill_bytes is not None and self.size > self.spill_bytes:
            self._spill()

    def _spill(self) -> None:
        with tempfile.TemporaryFile(dir=self._directory) as file:  # O_TMPFILE, or unlinked at once
            spilled = self._spilled = SpilledBytes(os.dup(file.fileno()), 0)  # it owns the descriptor
        chunks, self._chunks, self.size = self._chunks, [], 0
        for chunk in chunks:
            self._write(spilled, chunk)
            self.size += len(chunk)

    @staticmethod
    def _write(spilled: SpilledBytes, data: bytes) -> None:
        fd = spilled._open_fd()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def getvalue(self) -> bytes:
        """All the bytes as one bytes object (read back from the file when spilled)."""
        finished = self.finish()
        return finished.read() if isinstance(finished, SpilledBytes) else finished

    def finish(self) -> Payload:
        """What was appended so far: `bytes` if it stayed in memory, else the `SpilledBytes` of the file
        (the same object on every call)."""
        if self._spilled is not None:
            self._spilled.size = self.size
            return self._spilled
        if len(self._chunks) > 1:
            self._chunks = [b"".join(self._chunks)]
        return self._chunks[0] if self._chunks else b""
