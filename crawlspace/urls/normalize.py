"""Resolve hrefs like a browser (WHATWG) and normalize URLs (RFC 3986 §6) for duplicate elimination.

Parsing and joining are delegated to ada-url, the WHATWG parser of Node.js (247 of 247 http(s)
resolution cases, 470k joins/s; DESIGN.md §6). On top of it `normalize` applies the
syntax-based normalizations of RFC 3986 §6.2.2 that WHATWG leaves alone: percent-encoded
unreserved characters are decoded and the hex digits of the remaining escapes upper-cased,
and the fragment is dropped. Only http and https URLs are crawlable.
"""

from __future__ import annotations

import re

import ada_url


class InvalidURL(ValueError):
    """A URL or href that a browser would reject, or that is not crawlable (not http/https)."""


_CRAWLABLE = frozenset({"http:", "https:"})
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _fix_escape(match: re.Match[str]) -> str:
    code = int(match.group(1), 16)
    if code in _UNRESERVED:
        return chr(code)
    return "%" + match.group(1).upper()


def join(base: str, href: str) -> str:
    """Resolve `href` against `base` as a browser does; raise InvalidURL where a browser would."""
    try:
        return str(ada_url.join_url(base, href))
    except ValueError as exc:
        raise InvalidURL(f"cannot resolve {href!r} against {base!r}") from exc


def normalize(url: str) -> str:
    """The canonical form of an http(s) URL used for the URL-seen test and storage."""
    try:
        parsed = ada_url.parse_url(url, attributes=("protocol", "href", "hash", "pathname", "search"))
    except ValueError as exc:
        raise InvalidURL(f"not a valid URL: {url!r}") from exc
    if parsed["protocol"] not in _CRAWLABLE:
        raise InvalidURL(f"not an http(s) URL: {url!r}")
    href: str = parsed["href"]
    fragment: str = parsed["hash"]
    if fragment:
        href = href[: len(href) - len(fragment)]
    elif href.endswith("#"):
        href = href[:-1]
    if "%" in href:
        href = _ESCAPE.sub(_fix_escape, href)
    return href


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
    return url if end < 0 else url[:end]
