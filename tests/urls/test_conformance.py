"""crawlspace.urls against the public suites in /work/shared/conformance (WHATWG, RFC 3986, w3lib, Nutch).

Pass counts are asserted exactly, so that a regression (or an improvement) shows up here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawlspace.urls import InvalidURL, Normalizer, join, normalize

CONFORMANCE = Path("/work/shared/conformance")
pytestmark = pytest.mark.skipif(not CONFORMANCE.is_dir(), reason="conformance data not present")


def _load(name: str) -> Any:
    return json.loads((CONFORMANCE / name).read_text(encoding="utf-8"))


def _whatwg_cases() -> list[dict[str, Any]]:
    return [case for case in _load("url_whatwg.json") if isinstance(case, dict)] if CONFORMANCE.is_dir() else []


def _is_http(text: str | None) -> bool:
    return text is not None and text.strip().lower().startswith(("http:", "https:"))


def _http_case(case: dict[str, Any]) -> bool:
    """A case about crawlable URLs: it parses to http(s), or it must fail with an http(s) input or base."""
    if case.get("failure"):
        return _is_http(case["input"]) or _is_http(case["base"])
    return case["protocol"] in ("http:", "https:")


def _resolve(case: dict[str, Any]) -> str | None:
    try:
        return join(case["base"], case["input"])
    except InvalidURL:
        return None


WHATWG = _whatwg_cases()
WHATWG_HTTP = [case for case in WHATWG if _http_case(case)]


def test_whatwg_suite_has_the_expected_shape() -> None:
    assert len(WHATWG) == 891
    assert len(WHATWG_HTTP) == 446
    assert sum(1 for case in WHATWG_HTTP if not case.get("failure")) == 247


@pytest.mark.parametrize("case", WHATWG_HTTP, ids=lambda case: repr(case["input"])[:60])
def test_join_matches_whatwg_for_every_http_case(case: dict[str, Any]) -> None:
    expected = None if case.get("failure") else case["href"]
    assert _resolve(case) == expected


def test_join_never_crashes_and_rejects_every_failure_case() -> None:
    """Every case of the suite, any scheme: only InvalidURL may escape, and failures do fail."""
    agreed = 0
    for case in WHATWG:
        got = _resolve(case)
        if case.get("failure"):
            assert got is None, case
        agreed += got == case.get("href")
    # non-special schemes (data:, javascript:, ...) resolve as a browser does as well
    assert agreed == len(WHATWG)


@pytest.mark.parametrize("case", [c for c in WHATWG_HTTP if not c.get("failure")], ids=lambda c: repr(c["input"])[:60])
def test_normalize_of_a_whatwg_result_keeps_it_but_the_fragment(case: dict[str, Any]) -> None:
    url = normalize(case["href"])
    assert "#" not in url
    assert url.startswith(case["protocol"] + "//")
    assert normalize(url) == url


def test_rfc3986_reference_resolution() -> None:
    """All 42 examples of RFC 3986 §5.4, equal after normalization (the documented deviations)."""
    cases = _load("rfc3986_resolution.json")
    assert len(cases) == 42
    exact = 0
    for case in cases:
        got = join(case["base"], case["ref"])
        expected = case["expected"]
        alternatives = case.get("expected_alternatives", [expected])
        if got in alternatives:
            exact += 1
            continue
        # `//g` -> http://g/ : the same URL once the empty path is spelled "/" (RFC 3986 §6.2.3)
        assert _is_http(expected) and normalize(got) == normalize(expected), case
    assert exact == 41


def test_rfc3986_http_g_takes_the_backward_compatible_reading() -> None:
    assert join("http://a/b/c/d;p?q", "http:g") == "http://a/b/c/g"
    assert join("http://a/b/c/d;p?q", "//g") == "http://g/"


W3LIB_DIFFERENCES = {
    "http://www.example.com/do?b=&c&a=2": "w3lib writes a bare key as 'c='; we keep the query as sent",
    "http://www.example.com/do?1750,4": "w3lib parses a bare value as a key ('1750%2C4='); same reason",
    "http://www.example.com/do?q=a space&a=1": "w3lib writes spaces as '+'; WHATWG and we use %20",
    "http://www.example.com/do?q=a%20space&a=1": "same: %20 stays %20 ('+' would be a literal plus to some servers)",
    "https://example.com/a%23b%2cc#bash": "w3lib decodes %2C; ',' is reserved (RFC 3986 §2.2), so we keep %2C",
    "a#frag": "a relative input: we normalize absolute http(s) URLs only",
    "a?b=1#frag": "relative input",
    "?b=1": "relative input",
    "sftp://UsEr:PaSsWoRd@www.EXAMPLE.com/": "not http(s): not crawlable",
    "http://.éxamplé.com/résumé?q=résumé": "w3lib keeps a host that fails IDNA; WHATWG punycodes each label",
}

NUTCH_DIFFERENCES = {
    "http://bücher.de/": "Nutch keeps Unicode hosts by default; WHATWG (and DNS) use punycode",
    "https://www.0251-sachverst%c3%a4ndiger.de/": "same: punycode host",
    "http://x.com/?x[y]=1": "Nutch escapes []|^` in queries; browsers send them as they are",
    "http://www.example.com/a/c/../b/search?q=foobar|": "same",
    "http://www.example.com/a/c/../b/search?q=foobar^": "same",
    "http://www.example.com/a/c/../b/search?q=foobar`": "same",
    "http://www.example.com/a/c/../b/search?q=foobar%": "Nutch escapes a stray '%'; browsers send it as it is",
    "http://www.example.com/p%zz%77%v": "same (the valid %77 is decoded by both)",
    "http://www.example.com/search?q=foobar%": "same",
    "http://www.example.com/search?q=foobar%2": "same",
    "http://foo.com//aa/bb/foo.html": "Nutch collapses '//'; an empty segment can name another resource",
    "http://foo.com/aa//bb/foo.html": "same",
    "http://foo.com/aa/bb//foo.html": "same",
    "http://foo.com//aa//bb//foo.html": "same",
    "http://foo.com////aa////bb////foo.html": "same",
    "https://john.doe@www.example.com:1234/forum/questions/?tag=networking&order=newest#top": "Nutch drops userinfo",
    "https://user@[2600:1f18:200d:fb00:2b74:867c:ab0c:150a]/": "Nutch drops userinfo",
    "https://user@[2600:1f18:200d:fb00:2b74:867c:ab0c:150a]:443/": "Nutch drops userinfo",
    "https://user@[2600:1f18:200d:fb00:2b74:867c:ab0c:150a]/path/../to/index.html": "Nutch drops userinfo",
}


def _try(normalizer: Normalizer, url: str) -> str | None:
    try:
        return normalizer(url)
    except InvalidURL:
        return None


def test_w3lib_canonicalization_with_sorted_query() -> None:
    """w3lib's canonicalize_url sorts the query: every default-option case agrees but the listed ones."""
    normalizer = Normalizer(sort_query=True)
    cases = [
        case
        for case in _load("url_canon_w3lib.json")["cases"]
        if not case["kwargs"] and not case.get("input_is_bytes") and not case.get("input_prepared_with")
    ]
    disagreements = {case["input"] for case in cases if _try(normalizer, case["input"]) != case["expected"]}
    long_idn = {url for url in disagreements if url.startswith("http://www.éxamplé")}
    assert disagreements - long_idn == set(W3LIB_DIFFERENCES)
    assert len(long_idn) == 1  # an over-long IDN label: w3lib keeps it, WHATWG punycodes it
    assert len(cases) - len(disagreements) == 44


def test_nutch_basic_normalizer_agreement() -> None:
    """Nutch's basic normalizer (query order kept): every http(s) case agrees but the listed ones."""
    cases = [
        case
        for case in _load("url_canon_nutch.json")["cases"]
        if not case.get("config") and case["expected"] is not None and _is_http(case["input"])
    ]
    disagreements = {case["input"] for case in cases if _try(Normalizer(), case["input"]) != case["expected"]}
    # Nutch's own "http:" / "http:////" forms are URLs without a host: WHATWG rejects them
    hostless = {case["input"] for case in cases if _try(Normalizer(), case["input"]) is None}
    assert disagreements - hostless == set(NUTCH_DIFFERENCES)
    assert hostless == {"http:", "http:////", "http:///////"}
    assert len(cases) - len(disagreements) == 60
