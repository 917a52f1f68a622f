"""Who may read and who may control: the guard's decisions."""

from __future__ import annotations

from crawlspace.serve.security import Guard, Request, is_loopback
from crawlspace.serve.server import make_guard


def test_loopback_needs_no_token_but_a_loopback_host_name() -> None:
    guard = Guard(token=None)
    for host in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "127.3.4.5"):
        assert guard.check(Request("GET", host)).allowed, host
    refused = guard.check(Request("GET", "rebound.example:8080"))
    assert (refused.allowed, refused.status) == (False, 421)


def test_off_loopback_a_token_is_generated_and_required() -> None:
    guard = make_guard("0.0.0.0", None)
    assert guard.token is not None and len(guard.token) >= 24
    assert make_guard("127.0.0.1", None).token is None
    host = "crawler.example:8080"
    assert guard.check(Request("GET", host)).status == 401
    assert guard.check(Request("GET", host, authorization="Bearer nope")).status == 401
    assert guard.check(Request("GET", host, authorization=f"Bearer {guard.token}")).allowed
    assert guard.check(Request("GET", host, cookie_token=guard.token)).allowed
    by_query = guard.check(Request("GET", host, query_token=guard.token))
    assert by_query.allowed and by_query.set_cookie


def test_a_control_needs_the_csrf_token_and_the_same_origin() -> None:
    guard = Guard(token=None, csrf_secret="s" * 20)
    host = "127.0.0.1:8080"
    assert guard.check(Request("POST", host)).status == 403
    assert guard.check(Request("POST", host, csrf="wrong")).status == 403
    assert guard.check(Request("POST", host, csrf="s" * 20, origin="http://evil.example")).status == 403
    assert guard.check(Request("POST", host, csrf="s" * 20, origin=f"http://{host}")).allowed
    assert guard.check(Request("POST", host, csrf="s" * 20)).allowed


def test_loopback_addresses() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("example.com")
