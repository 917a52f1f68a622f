"""URL filter of the crawl loop: which discovered URLs may enter the frontier, and why not.

Two stages, in the order of the crawl loop (DESIGN.md §2):
- `rejection(entry)` before the URL-seen test: pure checks of the URL and its depth: scheme,
  scope (seed hosts, registered domains or URL prefixes, plus `allowed_domains`), include and
  exclude patterns, file extensions, depth from the seeds, and the syntactic spider-trap
  guards (URL length, path depth, repeated path segments, query parameters).
- `admission(entry)` after it, for new URLs only: the guards that count. A per-host budget of
  admitted URLs, and a per-host depth limit: no URL more than `max_host_depth` links below the
  shallowest known URL of its host. The latter is what stops the traps a syntax check cannot
  see (an endless calendar, endless "next page" chains: every URL new, short and plausible,
  but each one link deeper) without capping the depth of a whole-web crawl.

Every rejection returns a `Reason`, counted in stats.json under `filtered`. Defaults are chosen
for the real web (Heritrix's are in brackets): path depth 20 [20], 2 consecutive repetitions of
a segment sequence [2], URL length 2,048 [2,083 in browsers], 25 query parameters, 100,000 URLs
per host, host depth 30 [Heritrix caps the depth from the seeds at 20].

Per-host state is one small record per host that ever had a URL admitted: memory grows with
hosts, not URLs, like the frontier's host table.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import tldextract

from crawlspace.frontier.entry import FrontierEntry

MAX_URL_LENGTH = 2048
MAX_PATH_DEPTH = 20
MAX_SEGMENT_REPEATS = 2
MAX_QUERY_PARAMS = 25
HOST_PAGE_BUDGET = 100_000
MAX_HOST_DEPTH = 30
_DOMAIN_CACHE_SIZE = 65_536

IGNORED_EXTENSIONS: tuple[str, ...] = (
    # images
    "mng", "pct", "bmp", "gif", "jpg", "jpeg", "png", "pst", "psp", "tif", "tiff", "ai", "drw", "dxf", "eps",
    "ps", "svg", "cdr", "ico", "webp", "avif", "heic",
    # audio
    "mp3", "wma", "ogg", "wav", "ra", "aac", "mid", "au", "aiff", "flac", "m4a", "opus",
    # video
    "3gp", "asf", "asx", "avi", "mov", "mp4", "mpg", "qt", "rm", "swf", "wmv", "m4v", "webm", "mkv", "flv", "ts",
    # office and documents
    "xls", "xlsx", "xlsm", "ppt", "pptx", "pps", "doc", "docx", "odt", "ods", "odg", "odp", "pdf", "rtf", "epub",
    # archives and binaries
    "7z", "7zip", "bz2", "rar", "tar", "tgz", "xz", "zip", "gz", "zst", "exe", "msi", "bin", "dmg", "iso", "apk",
    "deb", "rpm", "jar", "whl",
    # other
    "css", "js", "mjs", "woff", "woff2", "ttf", "otf", "eot", "map", "wasm",
)  # fmt: skip
"""Extensions of resources a crawler for text does not fetch by default (Scrapy's list, extended)."""


class Reason(StrEnum):
    """Why a URL was not let into the frontier (the key in stats.json `filtered`)."""

    INVALID_URL = "invalid-url"  # a browser would reject it
    SCHEME = "scheme"
    OUT_OF_SCOPE = "out-of-scope"
    NOT_INCLUDED = "not-included"
    EXCLUDED = "excluded"
    EXTENSION = "extension"
    MAX_DEPTH = "max-depth"
    TOO_MANY_REDIRECTS = "too-many-redirects"
    URL_TOO_LONG = "url-too-long"
    PATH_TOO_DEEP = "path-too-deep"
    REPEATED_SEGMENTS = "repeated-segments"
    TOO_MANY_QUERY_PARAMS = "too-many-query-params"
    HOST_BUDGET = "host-budget"
    HOST_DEPTH = "host-depth"


class ScopeMode(StrEnum):
    ANY = "any"  # the whole web
    HOST = "host"  # the hosts of the seeds (any scheme or port)
    DOMAIN = "domain"  # the registered domains of the seeds (Public Suffix List, private domains on)
    PREFIX = "prefix"  # URLs under a seed's directory (any scheme), Heritrix's SURT prefix scope


def split_url(url: str) -> tuple[str, str, str, str]:
    """scheme, hostname (no userinfo, no port), path and query of a normalized URL, without parsing it."""
    scheme_end = url.index("://")
    start = scheme_end + 3
    path_at = url.find("/", start)
    query_at = url.find("?", start)
    if path_at < 0 or (0 <= query_at < path_at):
        path_at = query_at if query_at >= 0 else len(url)
    authority = url[start:path_at]
    authority = authority[authority.rfind("@") + 1 :]
    if authority.startswith("["):
        host = authority[: authority.find("]") + 1]
    else:
        host = authority.rsplit(":", 1)[0] if ":" in authority else authority
    if query_at < 0:
        return url[:scheme_end], host, url[path_at:], ""
    return url[:scheme_end], host, url[path_at:query_at], url[query_at + 1 :]


class DomainResolver:
    """Registered domain (eTLD+1) of a host, from the Public Suffix List bundled with tldextract.

    Offline: no download at run time. Hosts under a suffix the list does not know (`.test`,
    `.internal`) follow the list's default rule `*`: their last two labels. IP addresses and
    single labels are their own domain. Answers are cached per host (bounded).
    """

    def __init__(self) -> None:
        self._extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True)
        self._cache: dict[str, str] = {}

    def __call__(self, host: str) -> str:
        host = host.lower().rstrip(".")
        cached = self._cache.get(host)
        if cached is not None:
            return cached
        domain = self._resolve(host)
        if len(self._cache) >= _DOMAIN_CACHE_SIZE:
            self._cache.clear()
        self._cache[host] = domain
        return domain

    def _resolve(self, host: str) -> str:
        if host.startswith("[") or _is_ip(host):
            return host
        result = self._extract(host)
        if result.suffix:
            return str(result.top_domain_under_public_suffix) or host
        labels = host.split(".")
        return ".".join(labels[-2:]) if len(labels) >= 2 else host


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _under(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)


class Scope:
    """The part of the web a crawl stays in, derived from its seeds (and seed redirects)."""

    def __init__(self, mode: ScopeMode | str = ScopeMode.ANY, allowed_domains: Iterable[str] = ()) -> None:
        self.mode = ScopeMode(mode)
        self.allowed_domains = tuple(domain.lower().strip(".") for domain in allowed_domains if domain.strip("."))
        self._domains = DomainResolver()
        self._hosts: set[str] = set()
        self._registered: set[str] = set()
        self._prefixes: set[str] = set()

    def add_seed(self, url: str) -> None:
        _, host, path, _ = split_url(url)
        self._hosts.add(host)
        if self.mode is ScopeMode.DOMAIN:
            self._registered.add(self._domains(host))
        elif self.mode is ScopeMode.PREFIX:
            directory = path[: path.rfind("/") + 1] or "/"
            self._prefixes.add(host + directory)

    def contains(self, url: str) -> bool:
        _, host, path, _ = split_url(url)
        if self.allowed_domains and not any(_under(host, domain) for domain in self.allowed_domains):
            return False
        mode = self.mode
        if mode is ScopeMode.ANY:
            return True
        if mode is ScopeMode.HOST:
            return host in self._hosts
        if mode is ScopeMode.DOMAIN:
            return self._domains(host) in self._registered
        location = host + path
        return any(location.startswith(prefix) for prefix in self._prefixes)

    def __repr__(self) -> str:
        return f"Scope({self.mode}, {len(self._hosts)} seed hosts, allowed_domains={list(self.allowed_domains)})"


def repeated_segments(segments: Sequence[str], max_repeats: int) -> bool:
    """Does a run of 1 or more segments occur more than `max_repeats` times in a row (/a/b/a/b/a/b)?"""
    count = len(segments)
    if count <= max_repeats or len(set(segments)) == count:
        return False
    for length in range(1, count // (max_repeats + 1) + 1):
        for start in range(count - length * (max_repeats + 1) + 1):
            unit = segments[start : start + length]
            repeats = 1
            position = start + length
            while segments[position : position + length] == unit:
                repeats += 1
                if repeats > max_repeats:
                    return True
                position += length
    return False


@dataclass(slots=True)
class _HostRecord:
    admitted: int
    min_depth: int


class UrlFilter:
    """The filter chain; see the module docstring. Stateful only in `admission` (per-host counts)."""

    def __init__(
        self,
        *,
        scope: Scope | None = None,
        schemes: Iterable[str] = ("http", "https"),
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
        exclude_extensions: Iterable[str] = IGNORED_EXTENSIONS,
        max_depth: int | None = None,
        max_redirects: int = 10,
        max_url_length: int | None = MAX_URL_LENGTH,
        max_path_depth: int | None = MAX_PATH_DEPTH,
        max_segment_repeats: int | None = MAX_SEGMENT_REPEATS,
        max_query_params: int | None = MAX_QUERY_PARAMS,
        host_page_budget: int | None = HOST_PAGE_BUDGET,
        max_host_depth: int | None = MAX_HOST_DEPTH,
    ) -> None:
        self.scope = scope or Scope()
        self.schemes = frozenset(scheme.lower().rstrip(":") for scheme in schemes)
        self.include = [re.compile(pattern) for pattern in include]
        self.exclude = [re.compile(pattern) for pattern in exclude]
        self.exclude_extensions = frozenset(ext.lower().lstrip(".") for ext in exclude_extensions)
        self.max_depth = max_depth
        self.max_redirects = max_redirects
        self.max_url_length = max_url_length
        self.max_path_depth = max_path_depth
        self.max_segment_repeats = max_segment_repeats
        self.max_query_params = max_query_params
        self.host_page_budget = host_page_budget
        self.max_host_depth = max_host_depth
        self._hosts: dict[str, _HostRecord] = {}
        self._seeds: set[str] = set()

    def add_seed(self, url: str) -> None:
        """A seed (or the target of a seed's redirect): in scope, exempt from include and depth."""
        self._seeds.add(url)
        self.scope.add_seed(url)

    def rejection(self, entry: FrontierEntry) -> Reason | None:
        """Why `entry` may not be crawled (checks of the URL alone), or None when it may."""
        url = entry.url
        if self.max_url_length is not None and len(url) > self.max_url_length:
            return Reason.URL_TOO_LONG
        if entry.hops > self.max_redirects:
            return Reason.TOO_MANY_REDIRECTS
        scheme, _, path, query = split_url(url)
        if scheme not in self.schemes:
            return Reason.SCHEME
        seed = url in self._seeds
        if not seed:
            if self.max_depth is not None and entry.depth > self.max_depth:
                return Reason.MAX_DEPTH
            if not self.scope.contains(url):
                return Reason.OUT_OF_SCOPE
            if self.include and not any(pattern.search(url) for pattern in self.include):
                return Reason.NOT_INCLUDED
        if self.exclude and any(pattern.search(url) for pattern in self.exclude):
            return Reason.EXCLUDED
        if self.exclude_extensions:
            last = path[path.rfind("/") + 1 :]
            dot = last.rfind(".")
            if dot >= 0 and last[dot + 1 :].lower() in self.exclude_extensions:
                return Reason.EXTENSION
        segments = path.split("/")[1:]
        if segments and not segments[-1]:
            segments.pop()
        if self.max_path_depth is not None and len(segments) > self.max_path_depth:
            return Reason.PATH_TOO_DEEP
        if self.max_segment_repeats is not None and repeated_segments(segments, self.max_segment_repeats):
            return Reason.REPEATED_SEGMENTS
        if self.max_query_params is not None and query and query.count("&") + 1 > self.max_query_params:
            return Reason.TOO_MANY_QUERY_PARAMS
        return None

    def admission(self, entry: FrontierEntry, host: str) -> Reason | None:
        """Admit a URL seen for the first time into its host's counts, or say why not.

        `host` is the frontier's host key (host[:port]). Call once per new URL, in discovery order.
        """
        record = self._hosts.get(host)
        if record is None:
            self._hosts[host] = _HostRecord(1, entry.depth)
            return None
        if self.host_page_budget is not None and record.admitted >= self.host_page_budget:
            return Reason.HOST_BUDGET
        if entry.depth < record.min_depth:
            record.min_depth = entry.depth
        elif self.max_host_depth is not None and entry.depth - record.min_depth > self.max_host_depth:
            return Reason.HOST_DEPTH
        record.admitted += 1
        return None

    def admitted(self, host: str) -> int:
        record = self._hosts.get(host)
        return 0 if record is None else record.admitted

    @property
    def seeds(self) -> list[str]:
        return sorted(self._seeds)

    def host_counts(self) -> dict[str, tuple[int, int]]:
        """host -> (URLs admitted, shallowest depth): the state a checkpoint keeps."""
        return {host: (record.admitted, record.min_depth) for host, record in self._hosts.items()}

    def restore(self, seeds: Iterable[str], host_counts: dict[str, tuple[int, int]]) -> None:
        """Continue from a checkpoint's seeds and per-host counts."""
        for seed in seeds:
            self.add_seed(seed)
        self._hosts = {host: _HostRecord(admitted, depth) for host, (admitted, depth) in host_counts.items()}

    def merge(self, seeds: Iterable[str], host_counts: dict[str, tuple[int, int]]) -> None:
        """Take in another partition's seeds and counts of hosts that are this partition's now (a
        resized crawl); a count heard twice is not added twice (the larger one stands)."""
        for seed in seeds:
            self.add_seed(seed)
        for host, (admitted, depth) in host_counts.items():
            record = self._hosts.get(host)
            if record is None:
                self._hosts[host] = _HostRecord(admitted, depth)
            else:
                record.admitted = max(record.admitted, admitted)
                record.min_depth = min(record.min_depth, depth)

    def __repr__(self) -> str:
        return (
            f"UrlFilter({self.scope!r}, include={len(self.include)}, exclude={len(self.exclude)}, "
            f"max_depth={self.max_depth}, hosts={len(self._hosts)})"
        )
