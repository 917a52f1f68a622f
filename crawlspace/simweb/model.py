"""The data of a generated web: flat numpy arrays indexed by node id, plus the small shared vocabulary.

A node is anything with a URL that the server answers for, except robots.txt and the trap's
calendar space (those are answered by rule, not stored). Nodes `0 .. P-1` are the pages of the
host trees (host h owns `host_start[h] .. host_start[h+1]-1`, its root `/` first); nodes `P ..`
are the "extras": exact copies, near-copies, redirects, 5xx and 404 URLs, and pages linked only
through nofollow links. Links live in CSR form (`link_start`, `link_dst`, ...), sorted by
source page; a negative `link_dst` is a link without a crawlable target (mailto:, javascript:)
or the entrance of the spider trap. Nothing here holds a page body: bodies are rendered on
demand from these arrays and the corpus (render.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from crawlspace.simweb.config import SimWebConfig

Int32Array = NDArray[np.int32]
Int64Array = NDArray[np.int64]
Int16Array = NDArray[np.int16]
Int8Array = NDArray[np.int8]
UInt8Array = NDArray[np.uint8]
BoolArray = NDArray[np.bool_]
FloatArray = NDArray[np.float64]


class ExtraKind(enum.IntEnum):
    """What an extra node is; its `extra_target` and `extra_status` are read according to the kind."""

    COPY = 1  # exact copy of extra_target (a page), status 200
    NEAR = 2  # extra_target's body with extra_aux words changed, status 200
    REDIRECT = 3  # extra_status 301/302/307/308 to extra_target; extra_aux 1: relative Location
    ERROR = 4  # extra_status 500 or 503
    MISSING = 5  # 404, linked from a page (a broken link)
    HIDDEN = 6  # status 200, linked only through rel=nofollow links


class LinkForm(enum.IntEnum):
    """How an href is spelled; every form resolves to the same target (render.py)."""

    ABSOLUTE = 0  # http://host/path
    RELATIVE = 1  # p3.html, d2/p3.html, ../p3.html
    DOT = 2  # ./p3.html
    PARENT = 3  # ../../s1/p3.html, climbing to the root first
    ROOT_RELATIVE = 4  # /s1/p3.html
    PROTOCOL_RELATIVE = 5  # //host/s1/p3.html
    UPPER_HOST = 6  # http://HOST/s1/p3.html
    EXPLICIT_PORT = 7  # http://host:80/s1/p3.html
    DOT_SEGMENTS = 8  # /s1/./x/../p3.html
    PERCENT_ENCODED = 9  # /%731/p3.html, /%7Euser/p3.html
    FRAGMENT = 10  # p3.html#sec2


_MASK = (1 << 64) - 1


def mix(*values: int) -> int:
    """splitmix64 over a sequence of integers: a stable hash (Python's hash() is salted per process)."""
    state = 0x9E3779B97F4A7C15
    for value in values:
        state = ((state ^ (value & _MASK)) + 0x9E3779B97F4A7C15) & _MASK
        state = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        state = ((state ^ (state >> 27)) * 0x94D049BB133111EB) & _MASK
        state ^= state >> 31
    return state


FORM_WEIGHTS = (0.12, 0.22, 0.08, 0.08, 0.18, 0.05, 0.05, 0.05, 0.05, 0.05, 0.07)

MAILTO = -1
JAVASCRIPT = -2
TRAP_ENTRY = -3

TILDE_DIR = 5
"""First-level directory number rendered as /~user/ (percent-encoding of unreserved `~`)."""


def _dir_name(code: int) -> str:
    level1, level2 = divmod(code, 4)
    if level1 == 0:
        return "/"
    top = "/~user/" if level1 == TILDE_DIR else f"/s{level1}/"
    return top if level2 == 0 else f"{top}d{level2}/"


DIRS: tuple[str, ...] = tuple(_dir_name(code) for code in range(24))
"""Directory of a page by its dir code (first level * 4 + second level)."""


@dataclass(frozen=True, slots=True, eq=False)
class Link:
    """One hyperlink as ground truth: its normalized target (None for mailto:/javascript:), anchor, rel."""

    target: str | None
    anchor_text: str
    nofollow: bool
    href: str
    """The href exactly as written in the page."""


@dataclass(frozen=True, slots=True, eq=False)
class Response:
    """What the server sends for one request (the body for GET; HEAD drops it)."""

    status: int
    content_type: str
    body: bytes
    location: str | None = None
    etag: str | None = None  # a changing web's pages (simweb.changes)
    last_modified: float | None = None  # Unix time of the version's change

    def replace_body(self, body: bytes, *, status: int) -> Response:
        return Response(status, self.content_type, body, self.location, self.etag, self.last_modified)


@dataclass(frozen=True, eq=False)
class WebData:
    """The generated arrays. Read-only by convention: nothing mutates them after generation."""

    config: SimWebConfig
    host_names: tuple[str, ...]
    host_start: Int64Array
    host_robots: Int8Array
    host_ip_index: Int32Array
    host_latency: FloatArray
    host_bandwidth: FloatArray
    trap_host: int
    page_host: Int32Array
    page_dir: Int8Array
    page_base: Int8Array
    page_bytes: Int32Array
    page_abs_only: BoolArray
    link_start: Int64Array
    link_dst: Int32Array
    link_form: UInt8Array
    link_nofollow: BoolArray
    extra_host: Int32Array
    extra_kind: UInt8Array
    extra_target: Int32Array
    extra_status: Int16Array
    extra_aux: Int32Array
    extra_path: tuple[str, ...]
    cluster: Int32Array
    near_of: Int32Array

    # Python-list views of the arrays that rendering reads per link: indexing a numpy array from
    # Python costs ~100 ns and boxes a numpy scalar, a list ~20 ns. Built on first use.
    @cached_property
    def pages(self) -> int:
        return int(self.page_host.shape[0])

    @cached_property
    def nodes(self) -> int:
        return self.pages + int(self.extra_host.shape[0])

    @cached_property
    def port_suffix(self) -> str:
        return "" if self.config.port == 80 else f":{self.config.port}"

    @cached_property
    def origins(self) -> tuple[str, ...]:
        return tuple(f"http://{name}{self.port_suffix}" for name in self.host_names)

    @cached_property
    def _page_host(self) -> list[int]:
        return self.page_host.tolist()  # type: ignore[no-any-return]

    @cached_property
    def _host_start(self) -> list[int]:
        return self.host_start.tolist()  # type: ignore[no-any-return]

    @cached_property
    def _page_dir(self) -> list[int]:
        return self.page_dir.tolist()  # type: ignore[no-any-return]

    @cached_property
    def _extra_host(self) -> list[int]:
        return self.extra_host.tolist()  # type: ignore[no-any-return]

    def host_of_node(self, node: int) -> int:
        pages = self.pages
        return self._page_host[node] if node < pages else self._extra_host[node - pages]

    def path_of(self, node: int) -> str:
        pages = self.pages
        if node >= pages:
            return self.extra_path[node - pages]
        local = node - self._host_start[self._page_host[node]]
        return "/" if local == 0 else f"{DIRS[self._page_dir[node]]}p{local}.html"

    def origin(self, host: int) -> str:
        return self.origins[host]

    def url_of(self, node: int) -> str:
        return self.origins[self.host_of_node(node)] + self.path_of(node)

    def status_of(self, node: int) -> int:
        pages = self.pages
        return 200 if node < pages else int(self.extra_status[node - pages])
