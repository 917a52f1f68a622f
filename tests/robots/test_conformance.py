"""crawlspace.robots against google/robotstxt's test suite and the real-world sample (shared/conformance)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawlspace.robots import parse
from crawlspace.robots.rules import _escape_pattern, path_params_query

CONFORMANCE = Path("/work/shared/conformance")
pytestmark = pytest.mark.skipif(not CONFORMANCE.is_dir(), reason="conformance data not present")

# Google-only behaviour we do not copy, with the reason (also in crawlspace/robots/rules.py).
GOOGLE_ONLY_DEVIATIONS = {
    "GoogleOnly_AcceptUserAgentUpToFirstSpace#2": "the caller's agent 'Foo Bar' counts as its product token 'Foo'",
}


def _load(name: str) -> Any:
    return json.loads((CONFORMANCE / name).read_text(encoding="utf-8"))


CASES: list[dict[str, Any]] = _load("robots_google.json") if CONFORMANCE.is_dir() else []


def _verdict(case: dict[str, Any]) -> bool:
    return parse(case["robots_txt"].encode("utf-8")).allowed(case["url"], case["user_agent"])


@pytest.mark.parametrize("case", [c for c in CASES if not c["google_only"]], ids=lambda c: c["name"])
def test_every_rfc_case_passes(case: dict[str, Any]) -> None:
    assert _verdict(case) is case["allowed"]


def test_google_only_cases() -> None:
    google_only = [case for case in CASES if case["google_only"]]
    failing = {case["name"] for case in google_only if _verdict(case) is not case["allowed"]}
    assert failing == set(GOOGLE_ONLY_DEVIATIONS)
    assert (len(google_only), len(google_only) - len(failing)) == (73, 72)
    assert sum(1 for case in CASES if not case["google_only"]) == 72


def test_helpers_match_google() -> None:
    helpers = _load("robots_google_helpers.json")
    for case in helpers["get_path_params_query"]:
        assert path_params_query(case["url"]) == case["expected_path_params_query"], case
    for case in helpers["maybe_escape_pattern"]:
        assert _escape_pattern(case["pattern"].encode()) == case["expected_escaped"], case
    for case in helpers["parse_stats"]:
        text = case["robots_txt"]
        body = text.encode() if text is not None else bytes.fromhex(case["robots_txt_bytes_hex"])
        rules = parse(body)
        expect = case["expect"]
        if "valid_directives" in expect:
            assert rules.directives == expect["valid_directives"], case["name"]
        if "unknown_directives" in expect:
            assert rules.unknown_directives == expect["unknown_directives"], case["name"]
        if "sitemap" in expect:
            assert rules.sitemaps == [expect["sitemap"]], case["name"]


def test_realworld_sample_parses_and_answers() -> None:
    directory = CONFORMANCE / "robots_realworld_sample"
    files = sorted(path for path in directory.iterdir() if path.name.endswith(".robots.txt"))
    assert len(files) == 39
    with_rules = 0
    for path in files:
        rules = parse(path.read_bytes())
        host = path.name.removesuffix(".robots.txt").replace("_443", "")
        for agent in ("crawlspace", "Googlebot", "*"):
            for url_path in ("/", "/robots.txt", "/search?q=x", "/a/b/c.html", "/%7Euser/", "/\u00e9t\u00e9"):
                verdict = rules.allowed(f"https://{host}{url_path}", agent)
                assert isinstance(verdict, bool)
                if url_path == "/robots.txt":
                    assert verdict
            delay = rules.crawl_delay(agent)
            assert delay is None or delay >= 0
        with_rules += not rules.allows_everything
    assert with_rules >= 35


def test_realworld_specific_verdicts() -> None:
    """Spot checks on real files, read by hand."""
    directory = CONFORMANCE / "robots_realworld_sample"
    moodle = parse((directory / "moodle.org_443.robots.txt").read_bytes())
    assert moodle.crawl_delay("crawlspace") == 20.0
    assert not moodle.allowed("https://moodle.org/mod/forum/search.php?q=1", "crawlspace")
    assert not moodle.allowed("https://moodle.org/sites/x.html", "crawlspace")
    assert moodle.allowed("https://moodle.org/course/view.php?id=5", "crawlspace")
    assert not moodle.allowed("https://moodle.org/course/view.php", "Adsbot-Google")  # Disallow: /*.*
    assert moodle.allowed("https://moodle.org/course/", "Adsbot-Google")
    assert moodle.crawl_delay("Adsbot-Google") is None  # its own group names none
    colorado = parse((directory / "www.colorado.edu.robots.txt").read_bytes())
    assert colorado.crawl_delay("crawlspace") == 10.0
    assert not colorado.allowed("http://www.colorado.edu/includes/x.js", "crawlspace")
    assert not colorado.allowed("http://www.colorado.edu/INSTALL.txt", "crawlspace")
    assert colorado.allowed("http://www.colorado.edu/install.txt", "crawlspace")  # paths are case-sensitive
    assert colorado.allowed("http://www.colorado.edu/news/", "crawlspace")
