"""Property-based tests: join and normalize on random and mutated input raise nothing but InvalidURL, and
join gives what the ada binding's own calls give."""

from __future__ import annotations

from collections.abc import Callable

import ada_url
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from crawlspace.frontier.entry import FrontierEntry
from crawlspace.urls import InvalidURL, Normalizer, host_of, join, normalize
from crawlspace.urls.filter import Scope, UrlFilter

SEEDS = [
    "http://example.com/a/b/c.html?x=1&y=2#f",
    "https://user:pw@EXAMPLE.co.uk:8443/%7Efoo/./bar/../baz;p?q=%2f#",
    "http://[::1]:8080/",
    "http://bücher.de/ä?ö=ü",
    "http://0x7f.0.0.1/%2e%2E/x",
]
URL_ALPHABET = st.sampled_from(list("abcXYZ019/?#&=%.:;@[]\\ -_~+!$'()*,\t\n\r\x00é€\U0001f600"))
normalizer = Normalizer(strip_session_ids=True, strip_tracking=True, strip_params=["x*"], sort_query=True)
scope = Scope("domain")  # built once: loading the Public Suffix List is the slow part
scope.add_seed(normalize(SEEDS[1]))


@st.composite
def mutated_urls(draw: st.DrawFn) -> str:
    """A known URL with a few characters inserted, deleted or replaced."""
    text = list(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 6))):
        position = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        if action == "insert" or not text:
            text.insert(position, draw(URL_ALPHABET))
        elif action == "delete":
            del text[min(position, len(text) - 1)]
        else:
            text[min(position, len(text) - 1)] = draw(URL_ALPHABET)
    return "".join(text)


ANY_TEXT = st.one_of(st.text(max_size=200), st.text(URL_ALPHABET, max_size=80), mutated_urls())


@given(base=st.one_of(st.sampled_from(SEEDS), ANY_TEXT), href=ANY_TEXT)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@example(base="http://e.com/", href="\ud800")
@example(base="http://e.com/", href="http://e.com:99999/")
def test_join_raises_only_invalid_url(base: str, href: str) -> None:
    try:
        resolved = join(base, href)
    except InvalidURL:
        return
    assert isinstance(resolved, str) and ":" in resolved
    # the one-parse path of the link pipeline gives what parsing again would
    try:
        expected: str | None = normalizer(resolved)
    except InvalidURL:
        expected = None
    try:
        fast: str | None = normalizer.serialized(resolved)
    except InvalidURL:
        fast = None
    assert fast == expected
    if expected is not None:
        assert normalizer.join(base, href) == expected


@given(url=ANY_TEXT)
@settings(max_examples=300)
def test_normalize_raises_only_invalid_url_and_is_idempotent(url: str) -> None:
    for function in (normalize, normalizer):
        try:
            once = function(url)
        except InvalidURL:
            continue
        assert once.startswith(("http://", "https://"))
        assert "#" not in once
        assert function(once) == once


@given(href=mutated_urls())
@settings(max_examples=300)
def test_resolved_and_normalized_links_always_pass_through_the_filter(href: str) -> None:
    """The filter chain never raises on a URL that normalization accepted."""
    try:
        url = normalize(join(SEEDS[0], href))
    except InvalidURL:
        assume(False)
        return
    url_filter = UrlFilter(scope=scope, include=["a"], exclude=["z"], max_depth=3)
    reason = url_filter.rejection(FrontierEntry(url, depth=2))
    assert reason is None or isinstance(reason, str)
    assert url_filter.admission(FrontierEntry(url, depth=2), host_of(url)) is None  # a host's first URL


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(SEEDS), href=st.one_of(mutated_urls(), st.text(URL_ALPHABET, max_size=40)))
def test_join_and_normalize_agree_with_the_ada_bindings_own_calls(base: str, href: str) -> None:
    """`join` calls ada's C API directly (urls/normalize.py `_serialize`): it must give what the binding's
    `join_url` and `normalize_url` give, and fail where they fail."""

    def through_binding(call: Callable[..., object], *arguments: str) -> str | None:
        try:
            return str(call(*arguments))
        except ValueError:
            return None

    def ours(base: str | None, href: str) -> str | None:
        try:
            return join(base, href)
        except InvalidURL:
            return None

    assert ours(base, href) == through_binding(ada_url.join_url, base, href)
    assert ours(None, href) == through_binding(ada_url.normalize_url, href)
