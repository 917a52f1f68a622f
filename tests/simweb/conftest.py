"""Shared simulated webs: generated once per session (they are deterministic and read-only)."""

from __future__ import annotations

import re

import ada_url
import pytest

from crawlspace.simweb import SimWeb, SimWebConfig

_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def resolve(base: str, href: str) -> str:
    """Resolve an href as a browser does (ada, WHATWG), then normalize: no fragment, unreserved unescaped."""
    url = str(ada_url.join_url(base, href)).split("#", 1)[0]

    def unescape(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()

    return _ESCAPE.sub(unescape, url)


TEST_CONFIG = SimWebConfig(hosts=150, seed=7, robots_crawl_delay=0.2, shared_ip_hosts=3)


@pytest.fixture(scope="session")
def web() -> SimWeb:
    return SimWeb.generate(TEST_CONFIG)


@pytest.fixture(scope="session")
def web_8080() -> SimWeb:
    """The same shape on a non-default port: URLs carry :8080."""
    return SimWeb.generate(SimWebConfig(hosts=40, seed=11, port=8080))
