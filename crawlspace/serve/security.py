"""Who may see the dashboard and who may press its buttons: the token, the Host check and the CSRF check.

Decisions only (`Guard.check` takes what a request carries and says yes or why not); app.py turns
them into responses. The rules:

- Bound to a loopback address without a token, any local process may read, as with any local
  service; the Host header must then name a loopback address or `localhost`, so a page on another
  site that rebinds its DNS name to 127.0.0.1 is refused (DNS rebinding).
- Bound anywhere else, a token is required (generated if none was given) on every request: an
  `Authorization: Bearer` header, the `crawlspace_token` cookie, or `?token=` once (the server
  answers with the cookie and the same URL without it, so the token does not stay in the address
  bar or the history).
- A control (POST) also needs the CSRF token the pages carry (a header or form field): a page on
  another origin can make the browser send the cookie, but cannot read the pages to learn it. A
  POST whose Origin header names another origin is refused as well.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

TOKEN_COOKIE = "crawlspace_token"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf"


def new_token() -> str:
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    """A bind address (or Host header name) that only this machine can reach."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The name part of a Host header (`127.0.0.1:8080`, `[::1]:8080`, `localhost`)."""
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@dataclass(frozen=True, slots=True)
class Request:
    """What the guard looks at, taken from an HTTP request by the server."""

    method: str
    host: str
    authorization: str = ""
    cookie_token: str = ""
    query_token: str = ""
    csrf: str = ""
    origin: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    status: int = 200
    reason: str = ""
    set_cookie: bool = False
    """The token came in the query: answer with the cookie and the URL without it."""


class Guard:
    def __init__(self, *, token: str | None, csrf_secret: str | None = None) -> None:
        self.token = token
        self.csrf_secret = csrf_secret or secrets.token_urlsafe(24)

    @property
    def needs_token(self) -> bool:
        return self.token is not None

    def check(self, request: Request) -> Verdict:
        via_query = False
        if self.token is None:
            if not is_loopback(_host_name(request.host)):
                return Verdict(False, 421, f"the dashboard answers to loopback names only, not Host {request.host!r}")
        else:
            bearer = request.authorization[7:] if request.authorization.lower().startswith("bearer ") else ""
            given = [value for value in (bearer, request.cookie_token, request.query_token) if value]
            if not any(hmac.compare_digest(value.encode(), self.token.encode()) for value in given):
                return Verdict(False, 401, "a token is required: open the URL the server printed, or send it as a "
                               "Bearer token")  # fmt: skip
            via_query = bool(request.query_token) and hmac.compare_digest(
                request.query_token.encode(), self.token.encode()
            )
        if request.method not in ("GET", "HEAD"):
            if request.origin and request.origin != "null" and urlsplit(request.origin).netloc != request.host:
                return Verdict(False, 403, f"a control from another origin ({request.origin}) is refused")
            if not request.csrf or not hmac.compare_digest(request.csrf.encode(), self.csrf_secret.encode()):
                return Verdict(False, 403, "the CSRF token is missing or wrong: use the dashboard's own buttons")
        return Verdict(True, set_cookie=via_query and request.method in ("GET", "HEAD"))
