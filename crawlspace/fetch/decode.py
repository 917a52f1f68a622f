"""Streaming Content-Encoding decoders with caps on output size and compression ratio.

Why our own and not aiohttp's auto-decompression: aiohttp's decoders have no output cap, so a
40 KB gzip body can become 40 MB in memory (and a 4 KB zstd frame 4 GB) before anyone can say
no. Here every codec is driven with an output limit, chunk by chunk as the body arrives, and the
fetcher stops reading as soon as a limit is crossed: a compression bomb costs at most
`max_output` bytes of memory and the compressed bytes read until then.

Two caps: `max_output` bytes of decoded content, and a ratio of decoded to encoded bytes
(`max_ratio`) enforced once the output passes `ratio_floor` (small, very repetitive pages
compress legitimately well; a megabyte that came from ten kilobytes is a bomb).

The output goes into a `BodyBuffer` as it is produced: the fetcher passes one that spills to a
file beyond a size, so that a large decoded page does not stay in memory while it waits.
"""

from __future__ import annotations

import zlib
from typing import IO, Protocol, cast

import brotli
import zstandard

from crawlspace.fetch.body import BodyBuffer

# Content-codings we decode, in the order we advertise them in Accept-Encoding.
SUPPORTED_ENCODINGS = ("gzip", "deflate", "br", "zstd")
_IDENTITY = frozenset({"", "identity"})


class DecodeError(Exception):
    """The body is not valid in its declared Content-Encoding, or the coding is unknown."""


class DecodeLimitExceeded(Exception):
    """Decoding would exceed a cap; `reason` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Stage(Protocol):
    @property
    def complete(self) -> bool:
        """The coded stream has ended (a body that stops before is incomplete)."""

    def decompress(self, data: bytes, limit: int) -> bytes:
        """Output for `data`, at most `limit` + 1 bytes (one more than allowed signals overflow)."""


class _Zlib:
    """gzip (with concatenated members) and deflate (zlib-wrapped, or raw as some servers send it)."""

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding != "deflate"
        self._obj: zlib._Decompress | None = zlib.decompressobj(47) if self._gzip else None
        self._finished = False
        self._head = b""

    def decompress(self, data: bytes, limit: int) -> bytes:
        if self._obj is None:  # deflate: sniff the zlib header in the first two bytes
            data = self._head + data
            if len(data) < 2:
                self._head = data
                return b""
            zlib_header = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self._obj = zlib.decompressobj(15 if zlib_header else -15)
        out: list[bytes] = []
        size = 0
        obj = self._obj
        while data and size <= limit:
            if self._finished:
                if not self._gzip or not data.strip(b"\0"):
                    break  # trailing garbage after the stream: ignored, as browsers do
                obj = self._obj = zlib.decompressobj(47)  # another gzip member
                self._finished = False
            try:
                chunk = obj.decompress(data, limit + 1 - size)
            except zlib.error as exc:
                raise DecodeError(f"invalid {'gzip' if self._gzip else 'deflate'} data: {exc}") from None
            out.append(chunk)
            size += len(chunk)
            if obj.eof:
                self._finished = True
                data = obj.unused_data
            else:
                data = obj.unconsumed_tail
        return b"".join(out)

    @property
    def complete(self) -> bool:
        return self._finished


class _Brotli:
    def __init__(self) -> None:
        self._obj = brotli.Decompressor()

    @property
    def complete(self) -> bool:
        return bool(self._obj.is_finished())

    def decompress(self, data: bytes, limit: int) -> bytes:
        obj = self._obj
        if obj.is_finished():
            return b""
        try:
            out = [obj.process(data, output_buffer_limit=limit + 1)]
            size = len(out[0])
            while size <= limit and not obj.can_accept_more_data() and not obj.is_finished():
                chunk = obj.process(b"", output_buffer_limit=limit + 1 - size)
                if not chunk:
                    break
                out.append(chunk)
                size += len(chunk)
        except brotli.error as exc:
            raise DecodeError(f"invalid br data: {exc}") from None
        return b"".join(out)


class _Overflow(Exception):
    pass


class _Sink:
    """Receives zstd output; raising from write() is how a cap stops the decompressor mid-frame."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.limit = 0

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        self.size += len(data)
        if self.size > self.limit:
            raise _Overflow
        return len(data)


class _Zstd:
    """Window capped at 8 MiB (what RFC 9659 asks decoders of HTTP to support): a frame asking for more
    memory is refused rather than allocated."""

    def __init__(self) -> None:
        self._sink = _Sink()
        self._writer = zstandard.ZstdDecompressor(max_window_size=1 << 23).stream_writer(
            cast("IO[bytes]", self._sink), write_size=1 << 16
        )

    @property
    def complete(self) -> bool:
        return True  # the stream writer does not tell; a cut frame yields what it held

    def decompress(self, data: bytes, limit: int) -> bytes:
        sink = self._sink
        sink.parts, sink.size, sink.limit = [], 0, limit
        try:
            self._writer.write(data)
        except _Overflow:
            pass
        except zstandard.ZstdError as exc:
            raise DecodeError(f"invalid zstd data: {exc}") from None
        return b"".join(sink.parts)


def _stage(encoding: str) -> _Stage:
    if encoding in ("gzip", "x-gzip", "deflate"):
        return _Zlib(encoding)
    if encoding == "br":
        return _Brotli()
    if encoding == "zstd":
        return _Zstd()
    raise DecodeError(f"unsupported content-encoding {encoding!r}")


class BoundedDecoder:
    """Undo a Content-Encoding header's codings (last applied first) as body chunks arrive."""

    def __init__(
        self,
        content_encoding: str | None,
        *,
        max_output: int,
        max_ratio: float = 100.0,
        ratio_floor: int = 1 << 20,
        sink: BodyBuffer | None = None,
    ) -> None:
        """`sink` receives the output (default: a buffer in memory)."""
        codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
        codings = [c for c in codings if c not in _IDENTITY]
        self._stages = [_stage(coding) for coding in reversed(codings)]
        self.max_output = max_output
        self.max_ratio = max_ratio
        self.ratio_floor = ratio_floor
        self._sink = sink if sink is not None else BodyBuffer()
        self.input_size = 0
        self.output_size = 0

    @property
    def identity(self) -> bool:
        return not self._stages

    def feed(self, chunk: bytes) -> None:
        """Decode one body chunk. Raises DecodeLimitExceeded (output so far is kept) or DecodeError.

        Every stage is asked for no more than the caps still allow, so the output of one chunk is
        bounded too (a 64 KB gzip chunk can hold 64 MB)."""
        self.input_size += len(chunk)
        room = self.max_output - self.output_size
        ratio_room = max(self.ratio_floor, int(self.max_ratio * self.input_size)) - self.output_size
        limit = max(min(room, ratio_room), 0) if self._stages else room
        data = chunk
        for stage in self._stages:
            data = stage.decompress(data, limit)
            if not data:
                return
        overflow = len(data) > limit
        if overflow:
            data = data[:limit]
        self._sink.append(data)
        self.output_size += len(data)
        if not overflow:
            return
        if limit == room:
            raise DecodeLimitExceeded(f"decoded body exceeds {self.max_output} bytes")
        raise DecodeLimitExceeded(
            f"compression ratio exceeds {self.max_ratio:g} ({self.output_size} bytes from {self.input_size})"
        )

    def finish(self) -> None:
        """The body has ended: raise DecodeError if a coded stream stopped before its end."""
        for stage in self._stages:
            if not stage.complete:
                raise DecodeError("coded stream ends before its end marker (truncated?)")

    def output(self) -> bytes:
        """The output so far, as one bytes object."""
        return self._sink.getvalue()


def decode_body(body: bytes, content_encoding: str | None, max_output: int, max_ratio: float = 100.0) -> bytes:
    """Decode a whole body at once, within the same caps; what was decoded when a cap hit is returned."""
    decoder = BoundedDecoder(content_encoding, max_output=max_output, max_ratio=max_ratio)
    try:
        decoder.feed(body)
    except DecodeLimitExceeded:
        pass
    return decoder.output()
