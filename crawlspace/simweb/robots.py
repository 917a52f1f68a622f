"""The kinds of robots.txt a simulated host can have: the text served, and the verdicts, decided apart.

Each kind is a small fixed policy. `robots_text` writes it the way real sites do (comments,
odd case, CRLF, several user-agent lines in one group for the MESSY kind), and `path_allowed`
states the same policy as plain Python predicates on the path, written by hand from RFC 9309
(group choice by product token, longest match, Allow wins a tie, `*` and `$`). The two are
kept apart on purpose: the ground truth must not depend on any robots.txt parser, least of all
the crawler's. Tests check the predicates against hand-written cases and against a parser.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

PRODUCT_TOKEN = "crawlspace"


class RobotsKind(enum.IntEnum):
    """What a host answers for /robots.txt."""

    NONE = 0  # 404: everything allowed
    ALLOW_ALL = 1  # empty Disallow
    DISALLOW_SUBTREE = 2  # Disallow: /s1/
    WILDCARD = 3  # Disallow: /*/d2/ and /*3.html$
    ALLOW_OVERRIDE = 4  # Disallow: /s2/, Allow: /s2/d1/
    AGENT_GROUP = 5  # crawlspace: Disallow /s3/ (+ Crawl-delay); *: Disallow /s1/
    CRAWL_DELAY = 6  # *: Crawl-delay, Disallow /s4/
    BLOCK_ALL = 7  # Disallow: /
    AGENT_BLOCKED = 8  # crawlspace: Disallow /; *: allow all
    SERVER_ERROR = 9  # 503: a crawler must treat the whole host as disallowed
    MESSY = 10  # comments, case, CRLF, a group naming two agents, Sitemap


KIND_WEIGHTS: Mapping[RobotsKind, float] = MappingProxyType(
    {
        RobotsKind.NONE: 0.25,
        RobotsKind.ALLOW_ALL: 0.15,
        RobotsKind.DISALLOW_SUBTREE: 0.11,
        RobotsKind.WILDCARD: 0.08,
        RobotsKind.ALLOW_OVERRIDE: 0.08,
        RobotsKind.AGENT_GROUP: 0.08,
        RobotsKind.CRAWL_DELAY: 0.11,
        RobotsKind.BLOCK_ALL: 0.03,
        RobotsKind.AGENT_BLOCKED: 0.03,
        RobotsKind.SERVER_ERROR: 0.03,
        RobotsKind.MESSY: 0.05,
    }
)

CRAWLABLE_ROOT = frozenset(
    kind for kind in RobotsKind if kind not in (RobotsKind.BLOCK_ALL, RobotsKind.AGENT_BLOCKED, RobotsKind.SERVER_ERROR)
)
"""Kinds under which crawlspace may fetch a host's root page."""


def robots_status(kind: RobotsKind) -> int:
    """HTTP status of /robots.txt."""
    if kind is RobotsKind.NONE:
        return 404
    if kind is RobotsKind.SERVER_ERROR:
        return 503
    return 200


def robots_text(kind: RobotsKind, *, base_url: str, crawl_delay: float) -> str:
    """The body served with status 200; empty for the kinds that answer 404 or 5xx."""
    delay = f"{crawl_delay:g}"
    if kind is RobotsKind.ALLOW_ALL:
        return "User-agent: *\nDisallow:\n"
    if kind is RobotsKind.DISALLOW_SUBTREE:
        return "User-agent: *\nDisallow: /s1/\n"
    if kind is RobotsKind.WILDCARD:
        return "User-agent: *\nDisallow: /*/d2/\nDisallow: /*3.html$\n"
    if kind is RobotsKind.ALLOW_OVERRIDE:
        return "User-agent: *\nDisallow: /s2/\nAllow: /s2/d1/\n"
    if kind is RobotsKind.AGENT_GROUP:
        return f"User-agent: {PRODUCT_TOKEN}\nDisallow: /s3/\nCrawl-delay: {delay}\n\nUser-agent: *\nDisallow: /s1/\n"
    if kind is RobotsKind.CRAWL_DELAY:
        return f"User-agent: *\nCrawl-delay: {delay}\nDisallow: /s4/\n"
    if kind is RobotsKind.BLOCK_ALL:
        return "User-agent: *\nDisallow: /\n"
    if kind is RobotsKind.AGENT_BLOCKED:
        return f"User-agent: {PRODUCT_TOKEN}\nDisallow: /\n\nUser-agent: *\nDisallow:\n"
    if kind is RobotsKind.MESSY:
        return (
            "# robots.txt: keep out of the old stuff\r\n"
            "user-agent: otherbot\r\n"
            "user-agent: CrawlSpace\r\n"
            "disallow: /s2/d3/\r\n"
            "\r\n"
            "USER-AGENT: *   # everyone else\r\n"
            "DISALLOW: /s1/d1/   # archived\r\n"
            f"Sitemap: {base_url}/sitemap.xml\r\n"
        )
    return ""


def product_token(agent: str) -> str:
    """The product token of a user-agent string (`crawlspace/0.1 (+url)` -> `crawlspace`), lower-cased."""
    token = agent.strip().split("/", 1)[0].split(None, 1)
    return token[0].lower() if token else ""


def path_allowed(kind: RobotsKind, path: str, agent: str = PRODUCT_TOKEN) -> bool:
    """RFC 9309 verdict for a normalized path (with query, if any) under a robots.txt kind."""
    token = product_token(agent)
    us = token == PRODUCT_TOKEN
    if kind in (RobotsKind.NONE, RobotsKind.ALLOW_ALL):
        return True
    if kind is RobotsKind.DISALLOW_SUBTREE:
        return not path.startswith("/s1/")
    if kind is RobotsKind.WILDCARD:
        # "/*/d2/": a "/d2/" that is not at the very start; "/*3.html$": the path ends in "3.html".
        return "/d2/" not in path[1:] and not path.endswith("3.html")
    if kind is RobotsKind.ALLOW_OVERRIDE:
        return not path.startswith("/s2/") or path.startswith("/s2/d1/")
    if kind is RobotsKind.AGENT_GROUP:
        return not path.startswith("/s3/" if us else "/s1/")
    if kind is RobotsKind.CRAWL_DELAY:
        return not path.startswith("/s4/")
    if kind in (RobotsKind.BLOCK_ALL, RobotsKind.SERVER_ERROR):
        return False
    if kind is RobotsKind.AGENT_BLOCKED:
        return not us
    if kind is RobotsKind.MESSY:
        return not path.startswith("/s2/d3/" if token in (PRODUCT_TOKEN, "otherbot") else "/s1/d1/")
    raise AssertionError(f"unhandled robots kind {kind!r}")


def crawl_delay(kind: RobotsKind, configured: float, agent: str = PRODUCT_TOKEN) -> float | None:
    """Crawl-delay that applies to `agent` on a host of this kind, or None when the file has none."""
    if kind is RobotsKind.CRAWL_DELAY:
        return configured
    if kind is RobotsKind.AGENT_GROUP and product_token(agent) == PRODUCT_TOKEN:
        return configured
    return None
