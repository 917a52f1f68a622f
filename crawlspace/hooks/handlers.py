"""Protocol handlers shipped with crawlspace: `file:` URLs, the worked example of a fetch protocol.

HTTP(S) is built into the engine (crawlspace.fetch). `FileHandler` crawls a directory tree the way
a web server would serve it, so the rest of the crawl loop cannot tell the difference: a file is a
200 with a Content-Type guessed from its name, a missing one a 404, one outside the root or
unreadable a 403, a directory URL without its trailing slash a 301 to the slashed one (relative
links of its index then resolve as on the web), and a directory is its `index.html` or, with
`listings`, an HTML list of its entries. Reads run in a worker thread (a slow disk must not stall
the event loop) and are bounded by `max_bytes` like HTTP bodies.

Security: only regular files under `root` (symbolic links resolved first) are ever read; a page
linking `file:///etc/passwd` gets a 403, and devices or FIFOs (a read could block forever) are
refused too.
"""

from __future__ import annotations

import asyncio
import email.utils
import html
import mimetypes
import os
import stat
import time
from pathlib import Path
from urllib.parse import quote, unquote

from crawlspace.fetch import FetchResult, Outcome

_REASONS = {200: "OK", 301: "Moved Permanently", 403: "Forbidden", 404: "Not Found"}


class FileHandler:
    """Fetches `file:` URLs of the files under `root` (see the module docstring)."""

    polite = False  # local files: no per-host delay

    def __init__(
        self, root: str | Path, *, max_bytes: int = 10 * 1024 * 1024, listings: bool = True, index: str = "index.html"
    ) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ValueError(f"the root of a FileHandler must be a directory: {root}")
        self.max_bytes = max_bytes
        self.listings = listings
        self.index = index
        self.fetches = 0

    def url_of(self, path: str | Path) -> str:
        """The file: URL of a path (what to give the crawler as a seed)."""
        resolved = Path(path).resolve()
        url = resolved.as_uri()
        return url + "/" if resolved.is_dir() and not url.endswith("/") else url

    async def fetch(self, url: str) -> FetchResult:
        self.fetches += 1
        return await asyncio.to_thread(self._fetch, url)

    def _fetch(self, url: str) -> FetchResult:
        started, clock = time.time(), time.monotonic()
        result = self._answer(url)
        result.started = started
        result.duration = time.monotonic() - clock
        return result

    def _answer(self, url: str) -> FetchResult:
        path = self._local_path(url)
        if path is None:
            return _response(url, 403, b"outside the crawled directory\n")
        try:
            info = path.stat()
        except FileNotFoundError:
            return _response(url, 404, b"no such file\n")
        except PermissionError:
            return _response(url, 403, b"permission denied\n")
        except OSError as exc:
            return FetchResult(url=url, outcome=Outcome.NETWORK_ERROR, error=f"{type(exc).__name__}: {exc}")
        if stat.S_ISDIR(info.st_mode):
            return self._directory(url, path)
        if not stat.S_ISREG(info.st_mode):
            return _response(url, 403, b"not a regular file\n")
        return self._file(url, path, info)

    def _local_path(self, url: str) -> Path | None:
        """The resolved path of a file: URL when it lies under the root, else None."""
        if not url.startswith("file://"):
            return None
        rest = url[len("file://") :].split("?", 1)[0].split("#", 1)[0]
        authority, slash, path = rest.partition("/")
        if authority not in ("", "localhost") or not slash:
            return None  # a file on another machine (UNC)
        try:
            resolved = Path(unquote("/" + path)).resolve()
        except (OSError, RuntimeError, ValueError):  # symlink loops, NUL bytes
            return None
        return resolved if resolved == self.root or resolved.is_relative_to(self.root) else None

    def _directory(self, url: str, path: Path) -> FetchResult:
        base = url.split("?", 1)[0]
        if not base.endswith("/"):
            return _response(url, 301, b"", [("Location", base + "/")])
        index = path / self.index
        if index.is_file():
            try:
                return self._file(url, index, index.stat())
            except OSError:
                return _response(url, 403, b"index not readable\n")
        if not self.listings:
            return _response(url, 403, b"directory listing disabled\n")
        try:
            entries = sorted(os.scandir(path), key=lambda entry: entry.name)
        except OSError:
            return _response(url, 403, b"directory not readable\n")
        lines = [f"<!doctype html><title>Index of {html.escape(path.name or '/')}</title><ul>"]
        for entry in entries:
            name = entry.name + ("/" if entry.is_dir() else "")
            lines.append(f'<li><a href="{quote(name)}">{html.escape(name)}</a></li>')
        lines.append("</ul>\n")
        return _response(url, 200, "\n".join(lines).encode(), [("Content-Type", "text/html; charset=utf-8")])

    def _file(self, url: str, path: Path, info: os.stat_result) -> FetchResult:
        try:
            with open(path, "rb") as handle:
                body = handle.read(self.max_bytes + 1)
        except PermissionError:
            return _response(url, 403, b"permission denied\n")
        except OSError as exc:
            return FetchResult(url=url, outcome=Outcome.NETWORK_ERROR, error=f"{type(exc).__name__}: {exc}")
        kind, encoding = mimetypes.guess_type(path.name)
        if encoding is not None:  # x.tar.gz is a gzip file to a crawler, not a tar with Content-Encoding
            kind = {"gzip": "application/gzip", "bzip2": "application/x-bzip2", "xz": "application/x-xz"}.get(
                encoding, "application/octet-stream"
            )
        headers = [
            ("Content-Type", kind or "application/octet-stream"),
            ("Content-Length", str(info.st_size)),
            ("Last-Modified", email.utils.formatdate(info.st_mtime, usegmt=True)),
        ]
        result = _response(url, 200, body[: self.max_bytes], headers)
        if len(body) > self.max_bytes:
            result.outcome, result.truncated = Outcome.TOO_LARGE, "length"
            result.error = f"file exceeds {self.max_bytes} bytes"
        return result

    def __repr__(self) -> str:
        return f"FileHandler({str(self.root)!r}, fetches={self.fetches})"


def _response(url: str, status: int, body: bytes, headers: list[tuple[str, str]] | None = None) -> FetchResult:
    if headers is None:
        headers = [("Content-Type", "text/plain; charset=utf-8")]
    return FetchResult(
        url=url,
        outcome=Outcome.for_status(status),
        status=status,
        reason=_REASONS.get(status, ""),
        headers=headers,
        body=body,
        decoded=body,
    )
