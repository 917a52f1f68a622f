"""WARC/1.1 writer: one gzip member per record, rolling files, digests computed here.

Records are serialized here and compressed with zlib, one gzip member each, so that any record
can be read from its offset alone (the CDXJ index relies on it) and a torn last record after a
crash can be cut off at a member boundary. Each record is written with one `write` call.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import uuid
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from crawlspace.fetch import FetchResult

WARC_VERSION = b"WARC/1.1"
_DROPPED_RESPONSE_HEADERS = frozenset({"transfer-encoding"})


def sha1_digest(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


def warc_date(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


@dataclass(slots=True, frozen=True)
class RecordLocation:
    filename: str
    offset: int
    length: int


class WarcWriter:
    def __init__(
        self,
        directory: str | Path,
        *,
        max_file_bytes: int = 1 << 30,
        prefix: str = "crawlspace",
        software: str = "crawlspace/0.1",
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_file_bytes = max_file_bytes
        self.prefix = prefix
        self.software = software
        self._serial = 0
        self._fd = -1
        self._path: Path | None = None
        self._size = 0
        self.records_written = 0
        self.files: list[Path] = []

    # -- files -------------------------------------------------------------------------------

    def _open_next(self) -> None:
        self.close()
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
        name = f"{self.prefix}-{stamp}-{self._serial:05d}-{socket.gethostname()}-{os.getpid()}.warc.gz"
        self._serial += 1
        self._path = self.directory / name
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = 0
        self.files.append(self._path)
        info = (
            f"software: {self.software}\r\nformat: WARC File Format 1.1\r\n"
            f"conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n"
            f"hostname: {socket.gethostname()}\r\n"
        ).encode()
        self._write_record(
            [("WARC-Type", "warcinfo"), ("WARC-Filename", name), ("Content-Type", "application/warc-fields")],
            info,
            None,
        )

    def close(self) -> None:
        if self._path is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._path = None

    def sync(self) -> None:
        if self._path is not None:
            os.fsync(self._fd)

    # -- records -----------------------------------------------------------------------------

    def _write_record(self, headers: list[tuple[str, str]], block: bytes, payload: bytes | None) -> RecordLocation:
        if self._path is None or self._size >= self.max_file_bytes:
            self._open_next()
        assert self._path is not None
        lines = [WARC_VERSION]
        has_id = any(name == "WARC-Record-ID" for name, _ in headers)
        if not has_id:
            lines.append(b"WARC-Record-ID: " + new_record_id().encode())
        if not any(name == "WARC-Date" for name, _ in headers):
            lines.append(b"WARC-Date: " + warc_date(datetime.now(UTC).timestamp()).encode())
        for name, value in headers:
            lines.append(f"{name}: {value}".encode())
        if payload is not None:
            lines.append(b"WARC-Payload-Digest: " + sha1_digest(payload).encode())
        lines.append(b"WARC-Block-Digest: " + sha1_digest(block).encode())
        lines.append(b"Content-Length: " + str(len(block)).encode())
        raw = b"\r\n".join(lines) + b"\r\n\r\n" + block + b"\r\n\r\n"
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
        member = compressor.compress(raw) + compressor.flush()
        offset = self._size
        written = os.write(self._fd, member)
        while written < len(member):
            written += os.write(self._fd, member[written:])
        self._size += len(member)
        self.records_written += 1
        return RecordLocation(self._path.name, offset, len(member))

    def write_exchange(self, result: FetchResult) -> RecordLocation:
        """request + response records of one fetch; returns where the response record is."""
        date = warc_date(result.started)
        response_id = new_record_id()
        request_id = new_record_id()
        http_head = _response_head(result)
        common = [("WARC-Date", date), ("WARC-Target-URI", result.url)]
        if result.address:
            common.append(("WARC-IP-Address", result.address))
        location = self._write_record(
            [
                ("WARC-Type", "response"),
                ("WARC-Record-ID", response_id),
                *common,
                ("Content-Type", "application/http;msgtype=response"),
            ]
            + ([("WARC-Truncated", "length")] if result.truncated else []),
            http_head + result.body,
            result.body,
        )
        self._write_record(
            [
                ("WARC-Type", "request"),
                ("WARC-Record-ID", request_id),
                *common,
                ("WARC-Concurrent-To", response_id),
                ("Content-Type", "application/http;msgtype=request"),
            ],
            _request_head(result),
            None,
        )
        return location

    def write_revisit(self, result: FetchResult, original_url: str, original_date: str | None = None) -> RecordLocation:
        """A revisit record (identical payload digest) for a body already stored at `original_url`."""
        headers = [
            ("WARC-Type", "revisit"),
            ("WARC-Date", warc_date(result.started)),
            ("WARC-Target-URI", result.url),
            ("WARC-Profile", "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"),
            ("WARC-Refers-To-Target-URI", original_url),
            ("WARC-Payload-Digest", sha1_digest(result.body)),
            ("Content-Type", "application/http;msgtype=response"),
        ]
        if original_date:
            headers.append(("WARC-Refers-To-Date", original_date))
        if result.address:
            headers.append(("WARC-IP-Address", result.address))
        return self._write_record(headers, _response_head(result), None)


def _response_head(result: FetchResult) -> bytes:
    lines = [f"HTTP/1.1 {result.status} {result.reason}".rstrip()]
    lines += [f"{k}: {v}" for k, v in result.headers if k.lower() not in _DROPPED_RESPONSE_HEADERS]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")


def _request_head(result: FetchResult) -> bytes:
    parts = urlsplit(result.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"GET {target} HTTP/1.1"] + [f"{k}: {v}" for k, v in result.request_headers]
    if not any(k.lower() == "host" for k, _ in result.request_headers):
        lines.insert(1, f"Host: {parts.netloc}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")
