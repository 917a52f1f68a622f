"""WARC/1.1 writer: one gzip member per record, rolling files, CDXJ index on close, crash recovery.

Records are serialized here and compressed with ISA-L's deflate (the `isal` package; its output is
ordinary gzip that every reader takes) instead of being written through fastwarc or warcio,
because writing is compression-bound and both libraries compress with zlib. Measured side by side
(bench/store/bench.py: 10,000 pages of 25 KB, request + response + metadata records each, one
core, medians of 3), in pages per CPU-second and bytes per page:

    this writer, isal level 1        5,500   12,211
    this writer on zlib level 6      1,110   11,311
    fastwarc (zlib 6, finish/record) 2,230   10,879
    warcio (defaults)                  790   10,809

so only ISA-L leaves room for the 3,000 pages/s the whole store must sustain on one core, for 8%
more bytes than zlib 6 (zlib level 1 compresses less than isal level 1, at a third of its speed).
Serializing headers by hand costs microseconds (digests and record ids included), and each
exchange goes to disk in one (gathering) `writev` call, so a crash can tear only the last exchange.
A body is read and compressed in parts (a spilled one from its file, `crawlspace.fetch.body`), and
the compressed parts are handed to that call as they are: a 10 MiB page costs its compressed size
in memory here (twice only where they must be joined: more parts than one call gathers, or a
partial write), not one copy of the body and three of its compression.

Layout and invariants:
- every file starts with a `warcinfo` record, and every other record names it (WARC-Warcinfo-ID);
- a `request` and a `metadata` record are WARC-Concurrent-To their `response` (or `revisit`), and
  the three are written together into one file (files roll only between exchanges);
- each record is its own gzip member, so it can be read from its offset alone (the CDXJ index
  gives offset and length) and a torn last member can be cut off at a member boundary;
- a file is *closed* once its CDXJ index (`NAME.cdxj` beside `NAME.warc.gz`) exists: the index is
  written (atomically) when the writer rolls or closes. A file without one was being written when
  its process died: `WarcWriter.recover` validates it record by record, cuts off a partly written
  last record and writes the index, which makes the directory consistent again.
File names are `PREFIX-TIMESTAMP-SERIAL-PID~HOST.warc.gz` (Heritrix's pattern), so they sort by
the time they were started and say which process on which machine wrote them.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from isal import isal_zlib

from crawlspace.fetch import FetchResult
from crawlspace.fetch.body import Payload, payload_parts
from crawlspace.store.cdxj import CdxjEntry, cdxj_path, write_cdxj

WARC_VERSION = "WARC/1.1"
WARC_SUFFIX = ".warc.gz"
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
_DROPPED_RESPONSE_HEADERS = frozenset({"transfer-encoding"})
_GZIP_WBITS = 31
_GZIP_ERROR = typing.cast(type[Exception], isal_zlib.error)  # the stub types it as an instance
_READ_CHUNK = 1 << 20
_ONE_CALL_BYTES = 1 << 18  # records up to this size are joined and compressed in one call (see _member)
_WRITEV_PARTS = min(os.sysconf("SC_IOV_MAX"), 1024)
_FILE_NAME = re.compile(r"^(?P<prefix>.+)-(?P<stamp>\d{20})-(?P<serial>\d{5,})-(?P<pid>\d+)~(?P<host>[^/]+)\.warc\.gz$")


_B32_PAIRS = [a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"]


def sha1_digest(*parts: Payload) -> str:
    """`sha1:BASE32` of the concatenated parts: the digest form of WARC-Block/Payload-Digest.

    A SHA-1 digest is 160 bits, exactly 32 base32 characters without padding, so it is spelled
    from ten-bit groups here: `base64.b32encode` is pure Python and cost a sixth of a record.
    """
    hasher = hashlib.sha1()
    for payload in parts:
        for part in payload_parts(payload):
            hasher.update(part)
    number = int.from_bytes(hasher.digest(), "big")
    return "sha1:" + "".join([_B32_PAIRS[(number >> shift) & 1023] for shift in range(150, -1, -10)])


_last_date: tuple[float, str] = (-1.0, "")
"""The last timestamp spelled, with its spelling (an exchange's fetch start is spelled twice: its
records' WARC-Date and its metadata's fetch-time); one tuple, read and replaced whole, so that
writers in two threads never pair one's timestamp with the other's text."""


def warc_date(timestamp: float) -> str:
    """WARC/1.1 date with microseconds (ISO 8601, UTC); `isoformat` is twice as fast as `strftime`."""
    global _last_date
    last_timestamp, text = _last_date
    if timestamp != last_timestamp:
        text = datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="microseconds")[:-6] + "Z"
        _last_date = (timestamp, text)
    return text


_VERSION_4 = bytes((byte & 0x0F) | 0x40 for byte in range(256))
_RFC_4122_VARIANT = bytes((byte & 0x3F) | 0x80 for byte in range(256))


def _uuid4_ids(random: bytes) -> list[str]:
    """The record ids (`<urn:uuid:...>`, version 4) of each 16 bytes of `random`, spelled as
    `uuid.UUID(bytes=..., version=4)` spells them but without an object per id: the version and
    variant bits are set for the whole pool by two translations, and the pool is spelled in hex once."""
    pool = bytearray(random)
    pool[6::16] = pool[6::16].translate(_VERSION_4)
    pool[8::16] = pool[8::16].translate(_RFC_4122_VARIANT)
    text = pool.hex()
    return [
        f"<urn:uuid:{text[at : at + 8]}-{text[at + 8 : at + 12]}-{text[at + 12 : at + 16]}"
        f"-{text[at + 16 : at + 20]}-{text[at + 20 : at + 32]}>"
        for at in range(0, len(text), 32)
    ]


class _RecordIds:
    """Random (version 4) record ids made 256 at a time from one urandom call."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: list[str] = []

    def __call__(self) -> str:
        if not self._ids:
            self._ids = _uuid4_ids(os.urandom(16 * 256))
        return self._ids.pop()


def _clean(value: str) -> str:
    """A header value on one line: WARC headers cannot be continued and CR/LF would forge fields."""
    return value.replace("\r", " ").replace("\n", " ") if ("\r" in value or "\n" in value) else value


def _field_lines(fields: Sequence[tuple[str, str]]) -> str:
    """`Name: value` lines, each ending in CRLF; a CR or LF inside a name or value cannot start a new field."""
    text = "".join([f"{name}: {value}\r\n" for name, value in fields])
    if text.count("\n") != len(fields) or text.count("\r") != len(fields):
        text = "".join([f"{_clean(name)}: {_clean(value)}\r\n" for name, value in fields])
    return text


def _warc_fields(fields: Sequence[tuple[str, str]]) -> bytes:
    """An application/warc-fields block."""
    return _field_lines(fields).encode("utf-8")


class WarcFormatError(ValueError):
    """A WARC file or record that is not what this module writes."""


@dataclass(slots=True, frozen=True)
class Capture:
    """Where a stored response (or revisit) is, and what a later revisit record must refer to."""

    filename: str
    offset: int
    length: int
    record_id: str
    date: str
    payload_digest: str

    def to_list(self) -> list[str | int]:
        return [self.filename, self.offset, self.length, self.record_id, self.date, self.payload_digest]

    @classmethod
    def from_list(cls, values: Sequence[object]) -> Capture:
        filename, offset, length, record_id, date, digest = values
        return cls(str(filename), int(str(offset)), int(str(length)), str(record_id), str(date), str(digest))


@dataclass(slots=True, frozen=True)
class RecoveredFile:
    """What `WarcWriter.recover` did to one file that was not closed."""

    path: Path
    records: int
    bytes_cut: int
    problem: str
    removed: bool = False


@dataclass(slots=True)
class _Member:
    """One record as a gzip member, in the parts the compressor gave."""

    parts: list[bytes]
    size: int


@dataclass(slots=True)
class _OpenFile:
    path: Path
    fd: int
    size: int
    warcinfo_id: str
    entries: list[CdxjEntry] = field(default_factory=list)


def fetch_metadata(
    result: FetchResult, *, outlinks: Sequence[str] = (), extra: Sequence[tuple[str, str]] = ()
) -> list[tuple[str, str]]:
    """The fields of the metadata record of one fetch (application/warc-fields)."""
    fields = [
        ("fetch-time", warc_date(result.started)),
        ("fetch-duration-ms", f"{result.duration * 1000:.1f}"),
        ("outcome", str(result.outcome)),
    ]
    fields.extend(extra)
    fields += [("outlink", url) for url in outlinks]
    return fields


class WarcWriter:
    """Appends WARC records to rolling files in one directory; one writer per process."""

    def __init__(
        self,
        directory: str | Path,
        *,
        max_file_bytes: int = 1 << 30,
        prefix: str = "crawlspace",
        compression_level: int = 1,
        info: Mapping[str, str] | None = None,
        software: str = "crawlspace/0.1",
    ) -> None:
        if not 0 <= compression_level <= 3:
            raise ValueError(f"compression_level must be in 0..3 (ISA-L levels), got {compression_level}")
        if "/" in prefix or not prefix:
            raise ValueError(f"bad WARC file prefix {prefix!r}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_file_bytes = max_file_bytes
        self.prefix = prefix
        self.compression_level = compression_level
        self.info = dict(info or {})
        self.software = software
        self._hostname = socket.gethostname().replace("/", "_") or "localhost"
        self._serial = _next_serial(self.directory, prefix)
        self._file: _OpenFile | None = None
        self._new_id = _RecordIds()
        self.records_written = 0
        self.bytes_written = 0
        self.files: list[Path] = []

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        current = self._file.path.name if self._file else None
        return f"<WarcWriter {self.directory} file={current} records={self.records_written}>"

    # -- files -------------------------------------------------------------------------------

    @property
    def current_file(self) -> Path | None:
        return self._file.path if self._file else None

    def _open_next(self) -> _OpenFile:
        self.close()
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")
        name = f"{self.prefix}-{stamp}-{self._serial:05d}-{os.getpid()}~{self._hostname}{WARC_SUFFIX}"
        self._serial += 1
        path = self.directory / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        warcinfo_id = self._new_id()
        self._file = _OpenFile(path, fd, 0, warcinfo_id)
        self.files.append(path)
        fields = [
            ("software", self.software),
            ("format", "WARC File Format 1.1"),
            ("conformsTo", CONFORMS_TO),
            ("hostname", self._hostname),
            *self.info.items(),
        ]
        block = _warc_fields(fields)
        member = self._member(
            _field_lines(
                [
                    ("WARC-Type", "warcinfo"),
                    ("WARC-Record-ID", warcinfo_id),
                    ("WARC-Date", warc_date(datetime.now(UTC).timestamp())),
                    ("WARC-Filename", name),
                    ("Content-Type", "application/warc-fields"),
                ]
            ),
            block,
        )
        self._append(self._file, [member])
        self.records_written += 1
        return self._file

    def _ensure_file(self) -> _OpenFile:
        current = self._file
        if current is None or current.size >= self.max_file_bytes:
            current = self._open_next()
        return current

    def close(self) -> None:
        """Close the current file and write its CDXJ index; the next record opens a new file."""
        current = self._file
        if current is None:
            return
        self._file = None
        os.fsync(current.fd)
        os.close(current.fd)
        write_cdxj(cdxj_path(current.path), current.entries)

    def sync(self) -> None:
        """Make everything written so far durable (called before the crawl table commits pointers to it)."""
        if self._file is not None:
            os.fsync(self._file.fd)

    # -- records -----------------------------------------------------------------------------

    def _member(self, fields: str, *block: Payload, payload_digest: str | None = None) -> _Member:
        """One record as a gzip member. `fields` are its header lines (`_field_lines`, spelled once per
        exchange where records share them) but for the digests and length, which are computed here
        unless the payload's digest is given."""
        length = sum(len(part) for part in block)
        digests = "" if payload_digest is None else f"WARC-Payload-Digest: {payload_digest}\r\n"
        digests += f"WARC-Block-Digest: {sha1_digest(*block)}\r\n"
        head = f"{WARC_VERSION}\r\n{fields}{digests}Content-Length: {length}\r\n\r\n"
        in_memory = [payload for payload in block if isinstance(payload, bytes)]  # not spilled to a file
        if length <= _ONE_CALL_BYTES and len(in_memory) == len(block):
            # a compressor object costs 7 µs to set up and tear down, more than compressing a request
            # record; one call on the joined record is as fast as the object on a 50 KB page
            record = b"".join([head.encode(), *in_memory, b"\r\n\r\n"])
            member = isal_zlib.compress(record, self.compression_level, _GZIP_WBITS)
            return _Member([member], len(member))
        compressor = isal_zlib.compressobj(self.compression_level, isal_zlib.DEFLATED, _GZIP_WBITS)
        parts = [compressor.compress(head.encode())]
        parts += [compressor.compress(part) for payload in block for part in payload_parts(payload)]
        parts.append(compressor.compress(b"\r\n\r\n"))
        parts.append(compressor.flush())
        parts = [part for part in parts if part]
        return _Member(parts, sum(len(part) for part in parts))

    def _append(self, current: _OpenFile, members: list[_Member]) -> None:
        """Write the members in one gathering write call, without joining them first (more calls
        only if the system takes less at once, or for more parts than one call may gather)."""
        parts = [part for member in members for part in member.parts]
        size = sum(member.size for member in members)
        written = os.writev(current.fd, parts) if len(parts) <= _WRITEV_PARTS else 0
        if written < size:
            view = memoryview(b"".join(parts))[written:]
            while view:
                view = view[os.write(current.fd, view) :]
        current.size += size
        self.bytes_written += size

    @staticmethod
    def _common(current: _OpenFile, result: FetchResult, date: str) -> str:
        """The header lines that every record of an exchange has (after its type and id)."""
        headers = [("WARC-Date", date), ("WARC-Target-URI", result.url)]
        if result.address:
            headers.append(("WARC-IP-Address", result.address))
        headers.append(("WARC-Warcinfo-ID", current.warcinfo_id))
        return _field_lines(headers)

    def _write_group(
        self,
        current: _OpenFile,
        result: FetchResult,
        common: str,
        main_id: str,
        main: _Member,
        metadata: Sequence[tuple[str, str]] | None,
    ) -> int:
        """Write the main record with its request (and metadata) in one call; returns the main record's offset.

        The records' own ids are the only header values not spelled already (in `common`), and they
        hold no CR or LF, so their lines are spelled here directly."""
        members = [main]
        if result.request_headers or result.status:
            fields = f"WARC-Type: request\r\nWARC-Record-ID: {self._new_id()}\r\n{common}"
            fields += f"WARC-Concurrent-To: {main_id}\r\nContent-Type: application/http;msgtype=request\r\n"
            members.append(self._member(fields, _request_head(result)))
        if metadata:
            fields = f"WARC-Type: metadata\r\nWARC-Record-ID: {self._new_id()}\r\n{common}"
            fields += f"WARC-Concurrent-To: {main_id}\r\nContent-Type: application/warc-fields\r\n"
            members.append(self._member(fields, _warc_fields(metadata)))
        offset = current.size
        self._append(current, members)
        self.records_written += len(members)
        return offset

    def write_exchange(self, result: FetchResult, *, metadata: Sequence[tuple[str, str]] | None = None) -> Capture:
        """response + request (+ metadata) records of one fetch; returns where the response is."""
        current = self._ensure_file()
        date = warc_date(result.started)
        response_id = self._new_id()
        head = _response_head(result)
        payload_digest = sha1_digest(result.body)
        common = self._common(current, result, date)
        fields = f"WARC-Type: response\r\nWARC-Record-ID: {response_id}\r\n{common}"
        fields += "Content-Type: application/http;msgtype=response\r\n"
        if result.truncated:  # why the body is incomplete: length, time or disconnect
            fields += _field_lines([("WARC-Truncated", str(result.truncated))])
        response = self._member(fields, head, result.body, payload_digest=payload_digest)
        offset = self._write_group(current, result, common, response_id, response, metadata)
        current.entries.append(
            CdxjEntry.for_capture(
                result.url,
                date,
                mime=result.content_type or "unk",
                status=result.status,
                digest=payload_digest,
                length=response.size,
                offset=offset,
                filename=current.path.name,
            )
        )
        return Capture(current.path.name, offset, response.size, response_id, date, payload_digest)

    def write_revisit(
        self,
        result: FetchResult,
        original_url: str,
        original_date: str,
        *,
        original: Capture | None = None,
        metadata: Sequence[tuple[str, str]] | None = None,
    ) -> Capture:
        """A revisit record (identical-payload-digest profile; server-not-modified for a 304 to a
        conditional GET, whose payload is the original's): HTTP headers only; the payload is the
        one stored for `original_url` at `original_date` (a WARC date), which is what the profile
        requires (WARC/1.1 §6.7.2: WARC-Refers-To-Target-URI, WARC-Refers-To-Date). The original's
        record id (WARC-Refers-To, optional) is added when its `original` capture is given; then its
        payload digest must equal this payload's, else ValueError. The caller vouches for the payload
        being the same otherwise (crawl.engine: equal fingerprints of the payloads).
        """
        current = self._ensure_file()
        date = warc_date(result.started)
        revisit_id = self._new_id()
        not_modified = result.status == 304  # the server said so (WARC/1.1 6.7.3): there is no payload to compare
        payload_digest = original.payload_digest if not_modified and original is not None else sha1_digest(result.body)
        if original is not None and payload_digest != original.payload_digest:
            raise ValueError(f"revisit of {result.url}: payload digest differs from the original's")
        common = self._common(current, result, date)
        fields = f"WARC-Type: revisit\r\nWARC-Record-ID: {revisit_id}\r\n{common}"
        fields += _field_lines(
            [
                ("WARC-Profile", NOT_MODIFIED_PROFILE if not_modified else REVISIT_PROFILE),
                *([("WARC-Refers-To", original.record_id)] if original is not None else []),
                ("WARC-Refers-To-Target-URI", original_url),
                ("WARC-Refers-To-Date", original_date),
                ("Content-Type", "application/http;msgtype=response"),
            ]
        )
        member = self._member(fields, _response_head(result), payload_digest=payload_digest)
        offset = self._write_group(current, result, common, revisit_id, member, metadata)
        current.entries.append(
            CdxjEntry.for_capture(
                result.url,
                date,
                mime="warc/revisit",
                status=result.status,
                digest=payload_digest,
                length=member.size,
                offset=offset,
                filename=current.path.name,
            )
        )
        return Capture(current.path.name, offset, member.size, revisit_id, date, payload_digest)

    # -- recovery ----------------------------------------------------------------------------

    @staticmethod
    def recover(directory: str | Path) -> list[RecoveredFile]:
        """Close the files that a dead writer left open: cut a torn last record, write the index.

        A file is open when it has no CDXJ index beside it. Files of a live process on this
        machine (another writer sharing the directory) are left alone. Safe to run twice.
        """
        directory = Path(directory)
        if not directory.is_dir():
            return []
        hostname = socket.gethostname().replace("/", "_") or "localhost"
        recovered: list[RecoveredFile] = []
        for path in sorted(directory.glob("*" + WARC_SUFFIX)):
            if cdxj_path(path).exists() or _written_by_live_process(path, hostname) is not None:
                continue
            recovered.append(_recover_file(path))
        return recovered


def _process_alive(pid: int, since: str | None = None) -> bool:
    """Whether process `pid` runs and (when `since`, the file's name stamp, is given) started before it.

    The start-time check tells a writer still alive from an unrelated process that was given
    the dead writer's pid later (after a reboot, say).
    """
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if _zombie(pid):  # dead, not yet reaped (a crashed crawl's worker a moment after the crash)
        return False
    if since is not None:
        started = _process_start_time(pid)
        try:
            created = datetime.strptime(since, "%Y%m%d%H%M%S%f").replace(tzinfo=UTC).timestamp()
        except ValueError:
            return True
        return started is None or started <= created + 2.0
    return True


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False


def _process_start_time(pid: int) -> float | None:
    """Wall-clock start of a process from /proc (Linux); None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="ascii") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _written_by_live_process(path: Path, hostname: str) -> int | None:
    """The pid of the live process on this machine that is writing `path`, if any."""
    match = _FILE_NAME.match(path.name)
    if not match or match["host"] != hostname:
        return None
    pid = int(match["pid"])
    return pid if _process_alive(pid, match["stamp"]) else None


def _next_serial(directory: Path, prefix: str) -> int:
    serial = 0
    for path in directory.glob(f"{prefix}-*{WARC_SUFFIX}"):
        match = _FILE_NAME.match(path.name)
        if match and match["prefix"] == prefix:
            serial = max(serial, int(match["serial"]) + 1)
    return serial


def _recover_file(path: Path) -> RecoveredFile:
    entries: list[CdxjEntry] = []
    good_end = 0
    records = 0
    problem = ""
    try:
        for record in iter_records(path):
            if record.problem:
                problem = record.problem
                break
            good_end = record.offset + record.length
            records += 1
            entry = record.cdxj_entry(path.name)
            if entry is not None:
                entries.append(entry)
    except OSError as exc:
        problem = f"unreadable: {exc}"
    size = path.stat().st_size
    if good_end < size:
        with open(path, "r+b") as handle:
            handle.truncate(good_end)
            handle.flush()
            os.fsync(handle.fileno())
    if records == 0:
        path.unlink()
        return RecoveredFile(path, 0, size, problem or "empty", removed=True)
    write_cdxj(cdxj_path(path), entries)
    return RecoveredFile(path, records, size - good_end, problem)


@dataclass(slots=True)
class StoredRecord:
    """One record read back by `iter_records`: its place in the file, headers and block."""

    offset: int
    length: int
    headers: dict[str, str]
    block: bytes
    problem: str = ""

    @property
    def type(self) -> str:
        return self.headers.get("warc-type", "")

    def http_parts(self) -> tuple[int, dict[str, str], bytes]:
        """Status, headers (lower-cased names; last wins) and body of an HTTP response block."""
        return parse_http_response(self.block)

    def cdxj_entry(self, filename: str) -> CdxjEntry | None:
        if self.type not in ("response", "revisit", "resource"):
            return None
        url = self.headers.get("warc-target-uri", "")
        date = self.headers.get("warc-date", "")
        if not url or not date:
            return None
        status = 0
        mime = "warc/revisit" if self.type == "revisit" else "unk"
        if self.type == "resource":
            mime = self.headers.get("content-type", "unk")
        elif self.headers.get("content-type", "").startswith("application/http"):
            try:
                status, http_headers, _ = self.http_parts()
            except WarcFormatError:
                status, http_headers = 0, {}
            if self.type == "response":
                mime = http_headers.get("content-type", "unk").split(";")[0].strip().lower() or "unk"
        digest = self.headers.get("warc-payload-digest", "")
        return CdxjEntry.for_capture(
            url,
            date,
            mime=mime,
            status=status,
            digest=digest,
            length=self.length,
            offset=self.offset,
            filename=filename,
        )


def iter_records(path: str | Path) -> Iterator[StoredRecord]:
    """Walk a per-record-gzip WARC file member by member, validating each record.

    Stops after the first record that is torn or malformed, yielding it with `problem` set; the
    offset of that record is where a valid file ends.
    """
    offset = 0
    with open(path, "rb") as handle:
        pending = b""
        eof = False
        while True:
            decompressor = isal_zlib.decompressobj(_GZIP_WBITS)
            pieces: list[bytes] = []
            consumed = 0
            while not decompressor.eof:
                if not pending:
                    if eof:
                        break
                    pending = handle.read(_READ_CHUNK)
                    if not pending:
                        eof = True
                        break
                try:
                    pieces.append(decompressor.decompress(pending))
                except _GZIP_ERROR as exc:
                    yield StoredRecord(offset, 0, {}, b"", problem=f"no valid gzip member at offset {offset}: {exc}")
                    return
                used = len(pending) - len(decompressor.unused_data)
                consumed += used
                pending = decompressor.unused_data
            if not decompressor.eof:
                if consumed or pieces:
                    yield StoredRecord(offset, consumed, {}, b"", problem=f"torn gzip member at offset {offset}")
                return
            raw = b"".join(pieces)
            record = _parse_record(offset, consumed, raw)
            yield record
            if record.problem:
                return
            offset += consumed


def _parse_record(offset: int, length: int, raw: bytes) -> StoredRecord:
    end = raw.find(b"\r\n\r\n")
    if not raw.startswith(b"WARC/") or end < 0:
        return StoredRecord(offset, length, {}, b"", problem=f"no WARC header at offset {offset}")
    headers: dict[str, str] = {}
    for line in raw[:end].split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            return StoredRecord(offset, length, {}, b"", problem=f"bad header line at offset {offset}")
        headers[name.strip().decode("utf-8", "replace").lower()] = value.strip().decode("utf-8", "replace")
    try:
        content_length = int(headers.get("content-length", ""))
    except ValueError:
        return StoredRecord(offset, length, headers, b"", problem=f"no Content-Length at offset {offset}")
    start = end + 4
    block = raw[start : start + content_length]
    if len(block) != content_length or raw[start + content_length :] != b"\r\n\r\n":
        return StoredRecord(offset, length, headers, b"", problem=f"record length mismatch at offset {offset}")
    return StoredRecord(offset, length, headers, block)


def read_record(path: str | Path, offset: int, length: int | None = None) -> StoredRecord:
    """The record whose gzip member starts at `offset` (as the CDXJ index and the crawl table say)."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read(length) if length else handle.read(_READ_CHUNK)
        decompressor = isal_zlib.decompressobj(_GZIP_WBITS)
        try:
            raw = decompressor.decompress(data)
            while not decompressor.eof and length is None:
                more = handle.read(_READ_CHUNK)
                if not more:
                    break
                raw += decompressor.decompress(more)
        except _GZIP_ERROR as exc:
            raise WarcFormatError(f"{path}: no gzip member at offset {offset}: {exc}") from None
        if not decompressor.eof:
            raise WarcFormatError(f"{path}: torn gzip member at offset {offset}")
    record = _parse_record(offset, len(data) - len(decompressor.unused_data), raw)
    if record.problem:
        raise WarcFormatError(f"{path}: {record.problem}")
    return record


def parse_http_response(block: bytes) -> tuple[int, dict[str, str], bytes]:
    end = block.find(b"\r\n\r\n")
    if end < 0 or not block.startswith(b"HTTP/"):
        raise WarcFormatError("not an HTTP response block")
    lines = block[:end].split(b"\r\n")
    parts = lines[0].split(None, 2)
    try:
        status = int(parts[1])
    except (IndexError, ValueError):
        raise WarcFormatError(f"bad HTTP status line {lines[0][:80]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().decode("latin-1").lower()] = value.strip().decode("latin-1")
    return status, headers, block[end + 4 :]


def _response_head(result: FetchResult) -> bytes:
    lines = [f"HTTP/1.1 {result.status} {result.reason}".rstrip()]
    lines += [f"{k}: {v}" for k, v in result.headers if k.lower() not in _DROPPED_RESPONSE_HEADERS]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")


def _request_head(result: FetchResult) -> bytes:
    _, _, rest = result.url.partition("://")
    netloc, slash, target = rest.partition("/")
    netloc, question, query = netloc.partition("?")
    target = "/" + target if slash else "/" + question + query
    lines = [f"GET {target.split('#', 1)[0]} HTTP/1.1"] + [f"{k}: {v}" for k, v in result.request_headers]
    if not any(k.lower() == "host" for k, _ in result.request_headers):
        lines.insert(1, f"Host: {netloc.rpartition('@')[2]}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")


@dataclass(slots=True, frozen=True)
class IndexedFile:
    """What `rebuild_indexes` found in one WARC file."""

    path: Path
    captures: int
    records: int
    problem: str


def warc_directory(path: str | Path) -> Path:
    """The WARC directory of a crawl directory, or the directory itself if it holds WARC files."""
    path = Path(path)
    return path / "warc" if (path / "warc").is_dir() else path


def rebuild_indexes(directory: str | Path, *, repair: bool = False) -> list[IndexedFile]:
    """Write the CDXJ index of every WARC file in `directory` again (`crawlspace warc index`).

    Files being written by a live process are skipped. A file with a torn or malformed record is
    indexed up to it and reported; with `repair`, dead writers' files are first recovered (the
    bad tail cut off), as a resumed crawl does.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no such directory: {directory}")
    if repair:
        WarcWriter.recover(directory)
    hostname = socket.gethostname().replace("/", "_") or "localhost"
    results: list[IndexedFile] = []
    for path in sorted(directory.glob("*" + WARC_SUFFIX)):
        if not cdxj_path(path).exists():
            pid = _written_by_live_process(path, hostname)
            if pid is not None and pid != os.getpid():
                results.append(IndexedFile(path, 0, 0, f"skipped: being written by process {pid}"))
                continue
        entries: list[CdxjEntry] = []
        records = 0
        problem = ""
        for record in iter_records(path):
            if record.problem:
                problem = record.problem
                break
            records += 1
            entry = record.cdxj_entry(path.name)
            if entry is not None:
                entries.append(entry)
        write_cdxj(cdxj_path(path), entries)
        results.append(IndexedFile(path, len(entries), records, problem))
    return results
