"""The query log the user-experience refresh policy reads: a UTF-8 text file, one query per line (a
query logged n times counts n times), written by a person or a program, or appended to by the
dashboard with every search made on its search page or API (`crawlspace serve DIR --query-log FILE`;
`crawl --serve` passes the crawl's `refresh_query_log`).

Why a file of its own, outside the crawl directory: serving a crawl never modifies the directory it
reads (issue 22), and the dashboard is a process of its own beside the crawl; an append-only file
is the one thing both can share without a lock. Each search is one `write` of one whole line to a
file opened with O_APPEND, so lines of concurrent writers never interleave and a reader never sees
half a line as a whole one.

The reader (`QueryLogTail`) reads what was appended since its last look, so a log that grows all
day costs only its growth per recomputation. Lines are normalized as queries are: whitespace runs
become one space, blank lines are skipped. A line that is not UTF-8, holds control characters, or
is longer than `MAX_QUERY_CHARS` is not a query anyone typed: it is skipped and counted
(`malformed`), never an error. A last line without its newline counts while it stays so (a file a
person saved without one) and is read again once it grows. A log that shrank or was replaced (its
inode changed) is read again from its start.

The writer (`QueryLogWriter`) escapes nothing into the log that could end a line: every whitespace
and control character (a newline in a query, U+2028, NUL) becomes a space before the line is
written, and a query longer than the reader accepts is not written at all.
"""

from __future__ import annotations

import logging
import os
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Protocol

from crawlspace.linetail import LineTail

MAX_QUERY_CHARS = 1000
_MAX_LINE_BYTES = 4 * MAX_QUERY_CHARS + 2  # UTF-8 takes at most 4 bytes a character (and a CR)

log = logging.getLogger("crawlspace")


class QueryLogError(ValueError):
    """A query log that cannot be read (missing, a directory, unreadable)."""


class SearchLog(Protocol):
    """Where the dashboard puts the searches made on it."""

    def append(self, query: str) -> bool: ...

    def close(self) -> None: ...


def normalize_query(text: str) -> str | None:
    """The query as one log line (no line break can survive), or None when it is nothing or too long."""
    cleaned = "".join(" " if unicodedata.category(char) == "Cc" else char for char in text)
    query = " ".join(cleaned.split())
    if not query or len(query) > MAX_QUERY_CHARS:
        return None
    return query


def _parse_line(raw: bytes) -> str | bool | None:
    """A line's query; None for a blank line; False for a malformed one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    text = text.removesuffix("\r")
    if any(unicodedata.category(char) == "Cc" and char != "\t" for char in text):
        return False
    query = " ".join(text.split())
    if not query:
        return None
    return query if len(query) <= MAX_QUERY_CHARS else False


class QueryLogTail:
    """The queries of a log that may grow while it is read (module docstring); `read` is the count of
    each query now. Not thread-safe: one reader calls it at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.counts: Counter[str] = Counter()
        self.lines = 0  # queries read from complete lines
        self._tail = LineTail(path, max_line_bytes=_MAX_LINE_BYTES)
        self._malformed = 0

    @property
    def malformed(self) -> int:
        return self._malformed + self._tail.overlong

    @property
    def restarts(self) -> int:
        """Times the log shrank or was replaced and was read again from its start."""
        return self._tail.restarts

    def read(self) -> Counter[str]:
        try:
            appended = self._tail.read()
        except IsADirectoryError:
            raise QueryLogError(f"{self.path}: cannot read the query log (it is a directory)") from None
        except OSError as exc:
            raise QueryLogError(f"{self.path}: cannot read the query log ({exc.strerror or exc})") from None
        if appended.restarted:
            self.counts, self.lines, self._malformed = Counter(), 0, 0
        for raw in appended.lines:
            query = _parse_line(raw)
            if query is False:
                self._malformed += 1
            elif isinstance(query, str):
                self.counts[query] += 1
                self.lines += 1
        counts = self.counts
        last = _parse_line(appended.partial) if appended.partial else None
        if isinstance(last, str):  # a last line without its newline: counted until it grows
            counts = counts.copy()
            counts[last] += 1
        return counts

    def stats(self) -> dict[str, int]:
        return {"query_log_lines": self.lines, "malformed_lines": self.malformed, "query_log_restarts": self.restarts}


def read_query_log(path: Path) -> Counter[str]:
    """The queries of a whole log with how often each was logged."""
    return QueryLogTail(path).read()


def create_query_log(path: Path) -> None:
    """The log as an empty file if there is none (a crawl creates it, so that a dashboard started
    beside it appends to the file it reads); an existing log is left as it is."""
    QueryLogWriter(path).close()


class QueryLogWriter:
    """Appends searches to a query log, one whole line per `write` (module docstring). A write that
    fails (a full disk) is said once in the log and counted; the search it records still ran."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise QueryLogError(f"{path}: cannot open the query log for appending ({exc.strerror or exc})") from None
        self.written = 0
        self.failed = 0

    def __repr__(self) -> str:
        return f"QueryLogWriter({str(self.path)!r}, {self.written} written)"

    def append(self, query: str) -> bool:
        line = normalize_query(query)
        if line is None:
            return False
        try:
            data = (line + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: not text a reader could decode
            return False
        try:
            os.write(self._fd, data)
        except OSError as exc:
            if not self.failed:
                log.warning("query log %s: cannot append (%s); searches go unlogged", self.path, exc.strerror or exc)
            self.failed += 1
            return False
        self.written += 1
        return True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
