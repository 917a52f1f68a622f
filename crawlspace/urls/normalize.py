"""Resolve hrefs like a browser (WHATWG) and normalize URLs (RFC 3986 §6) for duplicate elimination.

Parsing and joining are delegated to ada-url, the WHATWG parser of Node.js. Measured on
/work/shared/conformance/url_whatwg.json it passes all 446 cases that involve http(s) (247
successful parses, 199 expected failures) and crashes on none of the 891; yarl passed 122 of the
247 and urllib.parse 86 (DESIGN.md §6), so there is nothing to write ourselves here.

On top of the WHATWG serialization `normalize` applies the syntax-based normalizations of
RFC 3986 §6.2.2 that WHATWG leaves alone: percent-encoded unreserved characters are decoded and
the hex digits of the remaining escapes upper-cased; the fragment is dropped. Scheme and host
case, default ports, dot segments and the empty path (`/`) are already handled by WHATWG.
Optional rules, all off by default because they change what URL is requested: removing
session-id and tracking query parameters by name pattern, and sorting query parameters.

Deliberate deviations, checked in tests/urls/test_conformance.py:
- rfc3986_resolution.json `//g` against `http://a/b/c/d;p?q`: the RFC gives `http://g`, we give
  `http://g/`. WHATWG (and RFC 3986 §6.2.3 scheme-based normalization) spell the empty path of
  an http URL as `/`; both forms name the same resource.
- rfc3986_resolution.json `http:g`: we give the RFC's backward-compatible result
  `http://a/b/c/g` (what browsers do) instead of the strict `http:g`.
- Only http and https URLs are crawlable: `join` resolves any scheme as a browser does (so
  `mailto:` and `javascript:` hrefs resolve without error), `normalize` rejects the others.
- A lone UTF-16 surrogate in an href is rejected (InvalidURL) where a browser would write
  U+FFFD; such hrefs come only from broken decoders and name no fetchable resource.
- Against the canonicalizers of w3lib (Scrapy) and Nutch (url_canon_*.json, references rather
  than targets) we agree on 44 and 60 cases; where we differ we keep what a browser sends: `%20`
  not `+`, `%2C` not `,` (reserved), a stray `%` and `[]|^` in queries unescaped, `//` in paths
  and userinfo kept, hosts in punycode. Each difference is listed in that test.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from ada_url._ada_wrapper import ffi as _ffi  # the binding's cffi module: see _serialize
from ada_url._ada_wrapper import lib as _ada


class InvalidURL(ValueError):
    """A URL or href that a browser would reject, or that is not crawlable (not http/https)."""


_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PATH_SESSION = re.compile(r";(?:jsessionid|phpsessid|sid|sessionid)=[^/?]*", re.IGNORECASE)

SESSION_ID_PARAMS: tuple[str, ...] = (
    "jsessionid",
    "phpsessid",
    "aspsessionid*",
    "sid",
    "sessionid",
    "session_id",
    "cfid",
    "cftoken",
    "zenid",
    "oscsid",
)
"""Query parameter names (glob patterns, case-insensitive) that carry a session id."""

TRACKING_PARAMS: tuple[str, ...] = (
    "utm_*",
    "gclid",
    "gclsrc",
    "dclid",
    "gbraid",
    "wbraid",
    "fbclid",
    "msclkid",
    "yclid",
    "twclid",
    "ttclid",
    "li_fat_id",
    "igshid",
    "mc_cid",
    "mc_eid",
    "_ga",
    "_gl",
    "_hsenc",
    "_hsmi",
    "mkt_tok",
    "srsltid",
)
"""Query parameter names (glob patterns, case-insensitive) that only track the visitor."""


def _fix_escape(match: re.Match[str]) -> str:
    code = int(match.group(1), 16)
    if code in _UNRESERVED:
        return chr(code)
    return "%" + match.group(1).upper()


def join(base: str | None, href: str) -> str:
    """Resolve `href` against `base` as a browser does; raise InvalidURL where a browser would.

    With `base=None` the href must be absolute (a seed, a Location header without context).
    """
    try:
        return _serialize(href, base)
    except (ValueError, TypeError, AttributeError) as exc:  # UnicodeEncodeError (lone surrogates) is a ValueError
        raise InvalidURL(f"cannot resolve {href!r} against {base!r}") from exc


def _serialize(href: str, base: str | None) -> str:
    """The WHATWG serialization of `href` (against `base`) through ada's C API, as ada_url's own
    `join_url` and `normalize_url` call it, without the Python objects they wrap each call in (a
    garbage-collected handle and a buffer copy; `normalize_url` builds a dict of every component):
    2.2 µs a join against 1.4 here, on the 16,543 links of 300 pages of the throughput benchmark's
    web, for every link of every page. ValueError where the parser fails."""
    data = href.encode()
    if base is None:
        url = _ada.ada_parse(data, len(data))
    else:
        base_data = base.encode()
        url = _ada.ada_parse_with_base(data, len(data), base_data, len(base_data))
    try:
        if not _ada.ada_is_valid(url):
            raise ValueError("not a valid URL")
        serialized = _ada.ada_get_href(url)
        return _ffi.unpack(serialized.data, serialized.length).decode() if serialized.length else ""
    finally:
        _ada.ada_free(url)


def _param_matcher(patterns: Iterable[str]) -> re.Pattern[str] | None:
    parts = [fnmatch.translate(pattern.lower()) for pattern in patterns]
    return re.compile("|".join(parts)) if parts else None


def _param_name(param: str) -> str:
    name = param.split("=", 1)[0]
    if "%" in name:
        name = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)
    return name.lower()


class Normalizer:
    """The canonical spelling of an http(s) URL used for the URL-seen test and storage.

    Immutable once built; `Normalizer()` applies RFC 3986 §6 only. The optional rules apply to
    the query (and, for session ids, to `;jsessionid=`-style path parameters). `extra_schemes`
    makes URLs of other schemes crawlable (those a registered protocol handler fetches).
    """

    __slots__ = ("_drop", "_path_session", "_prefixes", "_sort")

    def __init__(
        self,
        *,
        strip_session_ids: bool = False,
        strip_tracking: bool = False,
        strip_params: Iterable[str] = (),
        sort_query: bool = False,
        extra_schemes: Iterable[str] = (),
    ) -> None:
        # schemes a protocol handler fetches (file:) are crawlable too; WHATWG serializes them as scheme:...
        self._prefixes = ("http://", "https://", *(scheme.lower() + ":" for scheme in extra_schemes))
        patterns = list(strip_params)
        if strip_session_ids:
            patterns += SESSION_ID_PARAMS
        if strip_tracking:
            patterns += TRACKING_PARAMS
        self._drop = _param_matcher(patterns)
        self._path_session = strip_session_ids
        self._sort = sort_query

    def __call__(self, url: str) -> str:
        """Normalize any absolute http(s) URL; InvalidURL for anything else."""
        try:
            href = _serialize(url, None)
        except (ValueError, TypeError, AttributeError) as exc:
            raise InvalidURL(f"not a valid URL: {url!r}") from exc
        return self.serialized(href)

    def join(self, base: str, href: str) -> str:
        """`join` then normalize, parsing once: the hot path of the link pipeline."""
        return self.serialized(join(base, href))

    def serialized(self, href: str) -> str:
        """Normalize an href that is already a WHATWG serialization (what `join` returns).

        WHATWG serializations are fixed points of the WHATWG parser, so parsing again would only
        cost time (it is half of `__call__`); anything else must go through `__call__`.
        """
        if not href.startswith(self._prefixes):
            raise InvalidURL(f"not an http(s) URL: {href!r}")
        hash_at = href.find("#")  # WHATWG escapes '#' everywhere but in front of the fragment
        if hash_at >= 0:
            href = href[:hash_at]
        if "%" in href:
            href = _ESCAPE.sub(_fix_escape, href)
        if self._drop is not None or self._sort:
            href = self._rewrite_query(href)
        return href

    def _rewrite_query(self, href: str) -> str:
        if self._path_session and ";" in href:
            query_at = href.find("?")
            path = href if query_at < 0 else href[:query_at]
            rest = "" if query_at < 0 else href[query_at:]
            href = _PATH_SESSION.sub("", path) + rest
        query_at = href.find("?")
        if query_at < 0:
            return href
        params = [param for param in href[query_at + 1 :].split("&") if param]
        drop = self._drop
        if drop is not None:
            params = [param for param in params if not drop.fullmatch(_param_name(param))]
        if self._sort:
            params.sort()
        query = "&".join(params)
        return href[:query_at] + ("?" + query if query else "")

    def __repr__(self) -> str:
        return f"Normalizer(drop={self._drop.pattern if self._drop else None!r}, sort_query={self._sort})"


_DEFAULT = Normalizer()


def normalize(url: str) -> str:
    """RFC 3986 §6 normalization of an http(s) URL (no optional rules); InvalidURL otherwise."""
    return _DEFAULT(url)


def host_of(url: str) -> str:
    """The host (with port when not default) of a normalized URL, without parsing it again."""
    start = url.index("//") + 2
    end = url.find("/", start)
    authority = url[start:] if end < 0 else url[start:end]
    at = authority.rfind("@")
    return authority[at + 1 :] if at >= 0 else authority


def origin_of(url: str) -> str:
    """scheme://host[:port] of a normalized URL: the key of the robots.txt cache."""
    start = url.index("//") + 2
    end = url.find("/", start)
    origin = url if end < 0 else url[:end]
    at = origin.rfind("@", start)
    return origin if at < 0 else origin[:start] + origin[at + 1 :]
