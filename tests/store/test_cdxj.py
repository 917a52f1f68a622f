"""CDXJ keys: the fast SURT spelling agrees with the Internet Archive's canonicalizer."""

from __future__ import annotations

import surt
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlspace.store.cdxj import CdxjEntry, surt_key

labels = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=6)
hosts = st.tuples(
    st.sampled_from(["", "www.", "www2.", "wwwx.", "WWW."]), st.lists(labels, min_size=1, max_size=3)
).map(lambda parts: parts[0] + ".".join(parts[1]) + ".test")
segments = st.one_of(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._~-", min_size=0, max_size=8),
    st.sampled_from([".", "..", "A", "x%41", "p;jsessionid=1", "index.html"]),
)
paths = st.lists(segments, max_size=4).map(lambda parts: "/" + "/".join(parts))
queries = st.sampled_from(["", "?b=1&a=2", "?", "?x"])


@settings(max_examples=400)
@given(scheme=st.sampled_from(["http", "https"]), host=hosts, path=paths, query=queries)
def test_surt_key_agrees_with_the_surt_package(scheme: str, host: str, path: str, query: str) -> None:
    url = f"{scheme}://{host}{path}{query}"
    assert surt_key(url) == surt.surt(url)


def test_cdxj_line_round_trip() -> None:
    entry = CdxjEntry.for_capture(
        "http://www.example.test/a b",
        "2026-03-01T12:00:00.123456Z",
        mime="text/html",
        status=200,
        digest="sha1:ABC",
        length=10,
        offset=20,
        filename="f.warc.gz",
    )
    assert entry.timestamp == "20260301120000" and entry.digest == "ABC"
    assert CdxjEntry.parse(entry.line()) == entry
