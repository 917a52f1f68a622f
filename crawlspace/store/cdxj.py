"""CDXJ indexes of WARC files: find a capture of a URL by time without reading the WARC.

One index per WARC file, `NAME.cdxj` beside `NAME.warc.gz`, in the format pywb and the
Internet Archive's tools read: one line per capture, `SURT TIMESTAMP14 {json}`, sorted bytewise,
where the JSON holds url, mime, status, digest, length, offset and filename (values as strings,
as pywb writes them). The SURT key is computed by the Internet Archive's own `surt` package so
that a replay tool that canonicalizes the request URL finds the same key. Lookups binary-search
each memory-mapped index, so finding a page costs a few page reads per WARC file, not a scan.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import surt as surt_lib

CDXJ_SUFFIX = ".cdxj"


_PLAIN_URL = re.compile(r"https?://([a-z0-9-]+(?:\.[a-z0-9-]+)*)(/(?:[a-z0-9._~-]+/)*[a-z0-9._~-]*)\Z")
_WWW = re.compile(r"www\d*\.")


def surt_key(url: str) -> str:
    """The SURT form of a URL used as the CDXJ sort key (`com,example)/path?query`).

    URLs of the plain shape (lower-case host without port, lower-case path of unreserved
    characters, no query, no dot segments, no trailing slash) are spelled here, which is what the
    Internet Archive's canonicalizer does with them (a property test holds the two equal);
    everything else goes through `surt`, at 15 times the cost.
    """
    match = _PLAIN_URL.match(url)
    if match is not None:
        host, path = match.groups()
        if not (path.endswith("/") and path != "/") and "/./" not in path + "/" and "/../" not in path + "/":
            www = _WWW.match(host)
            if www is not None:
                host = host[www.end() :]
            return ",".join(host.split(".")[::-1]) + ")" + path
    try:
        return str(surt_lib.surt(url))
    except Exception:  # surt raises assorted errors on odd URLs; an unsorted-but-present key beats none
        return url.lower()


def cdxj_timestamp(date: str) -> str:
    """14-digit timestamp (YYYYMMDDhhmmss) of a WARC-Date (the digits of the date, the first 14).

    A date spelled as the writer spells them (`2026-12-01T10:00:00.000000Z`) is cut out by position;
    any other spelling has its digits picked out one by one.
    """
    if date[4:5] == "-" and date[7:8] == "-" and date[10:11] == "T" and date[13:14] == ":" and date[16:17] == ":":
        stamp = date[:4] + date[5:7] + date[8:10] + date[11:13] + date[14:16] + date[17:19]
        if len(stamp) == 14 and stamp.isascii() and stamp.isdigit():
            return stamp
    digits = "".join(ch for ch in date if ch.isdigit())
    if len(digits) < 14:
        raise ValueError(f"not a WARC date: {date!r}")
    return digits[:14]


def cdxj_path(warc_path: Path) -> Path:
    name = warc_path.name
    for suffix in (".warc.gz", ".warc"):
        if name.endswith(suffix):
            return warc_path.with_name(name[: -len(suffix)] + CDXJ_SUFFIX)
    return warc_path.with_name(name + CDXJ_SUFFIX)


@dataclass(slots=True, frozen=True, order=True)
class CdxjEntry:
    key: str
    timestamp: str
    url: str
    mime: str
    status: int
    digest: str
    length: int
    offset: int
    filename: str

    @classmethod
    def for_capture(
        cls, url: str, date: str, *, mime: str, status: int, digest: str, length: int, offset: int, filename: str
    ) -> CdxjEntry:
        return cls(
            key=surt_key(url),
            timestamp=cdxj_timestamp(date),
            url=url,
            mime=mime or "unk",
            status=status,
            digest=digest.removeprefix("sha1:"),
            length=length,
            offset=offset,
            filename=filename,
        )

    def line(self) -> str:
        fields = {
            "url": self.url,
            "mime": self.mime,
            "status": str(self.status) if self.status else "-",
            "digest": self.digest or "-",
            "length": str(self.length),
            "offset": str(self.offset),
            "filename": self.filename,
        }
        return f"{self.key} {self.timestamp} {json.dumps(fields, ensure_ascii=False, separators=(', ', ': '))}"

    @classmethod
    def parse(cls, line: str) -> CdxjEntry:
        try:
            key, timestamp, payload = line.rstrip("\n").split(" ", 2)
            fields = json.loads(payload)
            status = fields.get("status", "-")
            return cls(
                key=key,
                timestamp=timestamp,
                url=fields["url"],
                mime=fields.get("mime", "unk"),
                status=int(status) if status.isdigit() else 0,
                digest=fields.get("digest", "-"),
                length=int(fields["length"]),
                offset=int(fields["offset"]),
                filename=fields["filename"],
            )
        except (ValueError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a CDXJ line: {line[:120]!r}") from exc

    @property
    def time(self) -> datetime:
        return datetime.strptime(self.timestamp, "%Y%m%d%H%M%S").replace(tzinfo=UTC)


def write_cdxj(path: Path, entries: Iterable[CdxjEntry]) -> None:
    """Write a sorted index atomically (a half-written index must never mark a WARC file closed)."""
    lines = sorted(entry.line().encode("utf-8") for entry in entries)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as handle:
        for line in lines:
            handle.write(line + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _lines_with_prefix(data: mmap.mmap | bytes, prefix: bytes) -> Iterator[bytes]:
    """Lines of a sorted file that start with `prefix`, by binary search over byte offsets."""
    low, high = 0, len(data)
    while low < high:
        middle = (low + high) // 2
        start = data.rfind(b"\n", 0, middle) + 1
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        if data[start:end] < prefix:
            low = end + 1
        else:
            high = start
    position = low
    while position < len(data):
        end = data.find(b"\n", position)
        end = len(data) if end < 0 else end
        line = data[position:end]
        if not line.startswith(prefix):
            return
        yield line
        position = end + 1


class CdxjIndex:
    """The captures of a directory of WARC files, found through their CDXJ indexes."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def files(self) -> list[Path]:
        return sorted(self.directory.glob("*" + CDXJ_SUFFIX))

    def captures(self, url: str) -> list[CdxjEntry]:
        """Every capture of `url` (same SURT key), oldest first."""
        key = surt_key(url)
        prefix = (key + " ").encode("utf-8")
        found: list[CdxjEntry] = []
        for path in self.files():
            if path.stat().st_size == 0:
                continue
            with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                found.extend(CdxjEntry.parse(line.decode("utf-8")) for line in _lines_with_prefix(data, prefix))
        found.sort(key=lambda entry: (entry.timestamp, entry.filename, entry.offset))
        return found

    def closest(self, url: str, at: datetime | None = None) -> CdxjEntry | None:
        """The capture of `url` nearest in time to `at` (the newest when `at` is None)."""
        captures = self.captures(url)
        if not captures:
            return None
        if at is None:
            return captures[-1]
        moment = at if at.tzinfo else at.replace(tzinfo=UTC)
        return min(captures, key=lambda entry: abs((entry.time - moment).total_seconds()))
