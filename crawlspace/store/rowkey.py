"""Row keys of the crawl table: the URL with its host reversed, so that sorting groups sites.

    http://www.example.com/a?b        ->  com.example.www/http/a?b
    https://example.com:8443/         ->  com.example/https:8443/
    http://user@127.0.0.1:8001/x      ->  127.0.0.1/http:8001@user/x

The reversed host (labels in reverse order, as in BigTable's webtable, seed 004) comes first and
ends at the first `/`. Because `/` sorts right after `.` and no host character sorts between
them, every key of a domain starts with `com.example.` or `com.example/` and these form one
contiguous run: one host's pages are contiguous, and so are one domain's hosts (which a `:` after
the host, as in Nutch's `com.example:http/`, would not guarantee: `com.example0:` sorts between
`com.example.www:` and `com.example:`). The first segment after the host always holds the scheme,
the port when it is not the scheme's default, and the userinfo if any, so the key is unambiguous
and `url_of(row_key(url)) == url` for every normalized URL. IP addresses are not reversed (their
octets already read from the network to the host). A `file:` URL has no host: `file:///srv/a`
is `/file/srv/a`, and all of them sort together before any host.
"""

from __future__ import annotations

import ipaddress
import re

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21"}


class RowKeyError(ValueError):
    """A string that is neither an absolute URL with a host nor a crawl-table row key."""


def _is_ip(host: str) -> bool:
    if host.startswith("["):
        return True
    if not host[-1:].isdigit():  # fast path: a name's last label is never all digits
        return False
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


def _reverse_host(host: str) -> str:
    return host if _is_ip(host) else ".".join(reversed(host.split(".")))


_HEADS: dict[str, str] = {}
"""`scheme://host` -> the row key's start (reversed host, then `/scheme`), for the plain hosts seen lately."""
_MAX_HEADS = 1 << 14


def row_key(url: str) -> str:
    """The row key of an absolute URL (normalize it first: the key keeps its spelling).

    Taken for every link of every page, whose hosts repeat (most links of a page stay on its site),
    so the start of the key of a plain `http(s)://name/...` URL is kept per `scheme://name`: the key
    is then one lookup and one concatenation.
    """
    slash = url.find("/", 8)
    if slash > 0:
        head = _HEADS.get(url[:slash])
        if head is not None:
            return head + url[slash:]
        start = 7 if url.startswith("http://") else 8 if url.startswith("https://") else 0
        host = url[start:slash]
        if (
            start
            and slash > start
            and "@" not in host
            and ":" not in host
            and "?" not in host
            and "#" not in host
            and "/" not in host
            and not host[-1].isdigit()
            and not host.startswith("[")
        ):
            if len(_HEADS) >= _MAX_HEADS:
                _HEADS.clear()
            head = _HEADS[url[:slash]] = ".".join(host.lower().split(".")[::-1]) + ("/http" if start == 7 else "/https")
            return head + url[slash:]
    return _row_key_general(url)


def _row_key_general(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme or not rest:
        raise RowKeyError(f"not an absolute URL: {url!r}")
    slash = rest.find("/")
    authority, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    if "?" in authority or "#" in authority:
        cut = min(i for i in (authority.find("?"), authority.find("#")) if i >= 0)
        authority, path = authority[:cut], authority[cut:] + path
    userinfo, at, hostport = authority.rpartition("@")
    if hostport.startswith("["):
        close = hostport.find("]")
        host, port = hostport[: close + 1], hostport[close + 2 :] if close + 1 < len(hostport) else ""
    else:
        host, _, port = hostport.partition(":")
    scheme = scheme.lower()
    if not host and scheme != "file":  # file:///path has no host: its key is /file/path
        raise RowKeyError(f"URL without a host: {url!r}")
    if port == DEFAULT_PORTS.get(scheme):
        port = ""
    segment = scheme + (":" + port if port else "") + ("@" + userinfo if at else "")
    return f"{_reverse_host(host.lower())}/{segment}{path}"


def url_of(key: str) -> str:
    """The URL a row key was made from (inverse of `row_key` for normalized URLs)."""
    host, sep, rest = key.partition("/")
    if not sep or not rest or not (host or rest.startswith("file/")):
        raise RowKeyError(f"not a row key: {key!r}")
    slash = rest.find("/")
    question = rest.find("?")
    ends = [i for i in (slash, question) if i >= 0]
    end = min(ends) if ends else len(rest)
    segment, path = rest[:end], rest[end:]
    scheme_port, at, userinfo = segment.partition("@")
    scheme, _, port = scheme_port.partition(":")
    if not scheme:
        raise RowKeyError(f"row key without a scheme: {key!r}")
    authority = (userinfo + "@" if at else "") + _reverse_host(host) + (":" + port if port else "")
    return f"{scheme}://{authority}{path}"


def is_url(text: str) -> bool:
    """Whether `text` is an absolute URL rather than a row key (which never starts with a scheme); the
    crawl's own URLs are told by their first characters, without the regular expression."""
    return text.startswith(("http://", "https://")) or _SCHEME.match(text) is not None
