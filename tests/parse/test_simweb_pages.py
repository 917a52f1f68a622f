"""parse_html + join + normalize on simulated-web pages agree with the web's ground truth, link by link.

The pages spell their links in every form (relative, ../, //host, upper-case hosts, :80,
dot segments, %-escapes, fragments, <base href>), so this checks resolution and normalization end to end.
"""

from __future__ import annotations

import pytest

from crawlspace.parse import parse_html
from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.urls import InvalidURL, normalize, url_fingerprint


@pytest.fixture(scope="module", params=["plain", "realistic"])
def web(request: pytest.FixtureRequest) -> SimWeb:
    return SimWeb.generate(SimWebConfig(hosts=40, seed=13, page_style=request.param))


def test_links_match_the_ground_truth(web: SimWeb) -> None:
    pages = [url for url, status in web.all_urls().items() if status == 200][:800]
    compared = forms = 0
    for url in pages:
        truth = web.links(url)
        page = parse_html(web.body(url), url, "text/html; charset=utf-8", agent="crawlspace")
        anchors = [link for link in page.links if link.kind == "a"]
        assert len(anchors) == len(truth), url
        for ours, expected in zip(anchors, truth, strict=True):
            assert ours.anchor_text == expected.anchor_text and ours.nofollow == expected.nofollow
            if expected.target is None:  # mailto:, javascript:
                with pytest.raises(InvalidURL):
                    normalize(ours.url)
                continue
            assert normalize(ours.url) == expected.target, (url, expected.href)
            assert url_fingerprint(normalize(ours.url)) == url_fingerprint(expected.target)
            compared += 1
            forms += expected.href != expected.target
    assert compared > 5000 and forms > 2000  # most hrefs are spelled differently from their target


def test_realistic_pages_keep_scripts_and_boilerplate_out_of_the_text() -> None:
    web = SimWeb.generate(SimWebConfig(hosts=10, seed=13, page_style="realistic", mean_out_links=50))
    url = next(url for url, status in web.all_urls().items() if status == 200)
    body = web.body(url)
    page = parse_html(body, url, "text/html; charset=utf-8", agent="crawlspace")
    assert b"<script>" in body and b"<style>" in body and b'<nav class="site-nav"' in body
    assert "function " not in page.text and "{" not in page.text  # scripts and styles are not text
    assert "All rights reserved" in page.text  # the footer's boilerplate is
    assert len(page.text) < 0.6 * len(body)
