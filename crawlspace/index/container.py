"""The file format every index file shares: a small JSON header and checksummed numpy sections.

    7-byte magic, version byte, u64 header length, header (JSON), sections (each 8-aligned)

The header holds the file's own fields and, under "sections", each section's offset (from the end
of the header, rounded up to 8), length, numpy dtype and xxh3-64 checksum. `open_container` maps
the file read-only and checks everything a reader could trip over later (magic, version, each
section inside the file with the element count its kind requires, checksums), so a truncated or
damaged file fails at once with `IndexFormatError` naming the file and what is wrong.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

__all__ = ["Container", "IndexFormatError", "SectionSpec", "open_container", "write_container"]

_PREFIX = struct.Struct("<7sBQ")

SectionSpec = Mapping[str, tuple[str, Callable[[dict[str, Any]], int] | None]]
"""Section name -> (dtype string, the element count it must have given the header; None: any)."""


class IndexFormatError(ValueError):
    """An index file that cannot be read: truncated, damaged, of another kind or format version."""


def _padded(size: int) -> int:
    return (size + 7) // 8 * 8


def write_container(
    path: Path, magic: bytes, version: int, header: dict[str, Any], sections: Mapping[str, npt.NDArray[Any]]
) -> Path:
    """Writes the file aside, fsyncs it and renames it over `path`: a reader sees the old file or the new."""
    arrays = {name: np.ascontiguousarray(data) for name, data in sections.items()}
    listing: dict[str, list[Any]] = {}
    offset = 0
    for name, raw in arrays.items():
        listing[name] = [offset, raw.nbytes, raw.dtype.str, xxhash.xxh3_64_intdigest(raw.data)]
        offset += _padded(raw.nbytes)
    header_bytes = json.dumps({**header, "sections": listing}, separators=(",", ":")).encode()
    start = _padded(_PREFIX.size + len(header_bytes))
    aside = path.with_name(path.name + ".writing")
    with open(aside, "wb") as out:
        out.write(_PREFIX.pack(magic, version, len(header_bytes)))
        out.write(header_bytes)
        out.write(b"\0" * (start - _PREFIX.size - len(header_bytes)))
        for raw in arrays.values():
            out.write(raw.data)
            out.write(b"\0" * (_padded(raw.nbytes) - raw.nbytes))
        out.flush()
        os.fsync(out.fileno())
    os.replace(aside, path)
    return path


@dataclass(slots=True)
class Container:
    """An opened file: its header and its sections as read-only arrays over the memory map."""

    path: Path
    header: dict[str, Any]
    sections: dict[str, npt.NDArray[Any]]
    mapping: mmap.mmap

    def close(self) -> None:
        """Closes the map unless arrays over it are still held (they keep it alive until they go)."""
        self.sections.clear()
        try:
            self.mapping.close()
        except BufferError:
            pass


def open_container(
    path: Path,
    *,
    magic: bytes,
    version: int,
    kind: str,
    spec: SectionSpec,
    error: type[IndexFormatError] = IndexFormatError,
    verify_checksums: bool = True,
) -> Container:
    def fail(message: str) -> IndexFormatError:
        return error(f"{path}: {message}")

    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size < _PREFIX.size:
                raise fail(f"{size} bytes: too short for {kind} (truncated?)")
            mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise error(f"{path}: cannot be read: {exc}") from exc
    container = Container(path, {}, {}, mapping)
    try:
        found_magic, found_version, header_length = _PREFIX.unpack_from(mapping, 0)
        if found_magic != magic:
            raise fail(f"not {kind} (bad magic)")
        if found_version != version:
            raise fail(f"format version {found_version}; this reader knows version {version}")
        if _PREFIX.size + header_length > size:
            raise fail(f"the header needs {header_length} bytes but the file has {size} (truncated)")
        try:
            header = json.loads(mapping[_PREFIX.size : _PREFIX.size + header_length])
        except ValueError as exc:
            raise fail(f"the header is not valid JSON ({exc})") from exc
        if not isinstance(header, dict) or not isinstance(header.get("sections"), dict):
            raise fail("the header is not a JSON object with a section table")
        declared = header["sections"]
        if set(declared) != set(spec):
            raise fail(f"sections {sorted(declared)} are not those of this format ({sorted(spec)})")
        start = _padded(_PREFIX.size + header_length)
        for name, (dtype, expected_count) in spec.items():
            offset, length, stored_dtype, checksum = declared[name]
            begin = start + int(offset)
            if stored_dtype != dtype:
                raise fail(f"section {name} has dtype {stored_dtype}, expected {dtype}")
            if begin + int(length) > size:
                raise fail(f"section {name} ends at byte {begin + length} but the file has {size} (truncated)")
            item = np.dtype(dtype).itemsize
            if length % item:
                raise fail(f"section {name} is {length} bytes, not a whole number of {dtype}")
            if expected_count is not None and length // item != expected_count(header):
                raise fail(f"section {name} holds {length // item} values, expected {expected_count(header)}")
            view = memoryview(mapping)[begin : begin + int(length)]
            if verify_checksums and xxhash.xxh3_64_intdigest(view) != checksum:
                raise fail(f"section {name} fails its checksum (damaged)")
            container.sections[name] = np.frombuffer(view, dtype=dtype)
        container.header = header
        return container
    except IndexFormatError:
        container.close()
        raise
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        container.close()
        raise fail(f"damaged header: {exc!r}") from exc
