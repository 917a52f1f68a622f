"""Link forms: every form a crawler meets is present, and every href resolves to its ground-truth target."""

from __future__ import annotations

import collections

from selectolax.lexbor import LexborHTMLParser as HTMLParser

from crawlspace.simweb import SimWeb
from tests.simweb.conftest import resolve


def form_of(href: str, port: int) -> str:
    """Classify an href by its spelling (independently of the generator's form codes)."""
    if href.startswith("mailto:"):
        return "mailto"
    if href.startswith("javascript:"):
        return "javascript"
    if "#" in href:
        return "fragment"
    if "%" in href:
        return "percent"
    if "/./" in href or ("/../" in href and not href.startswith("../")):
        return "dot-segments"
    if href.startswith("http://"):
        host = href[7:].split("/", 1)[0]
        if host != host.lower():
            return "upper-host"
        if f":{port}" in host:
            return "explicit-port"
        return "absolute"
    if href.startswith("//"):
        return "protocol-relative"
    if href.startswith("./"):
        return "dot"
    if href.startswith("../"):
        return "parent"
    if href.startswith("/"):
        return "root-relative"
    return "relative"


ALL_FORMS = {
    "mailto",
    "javascript",
    "fragment",
    "percent",
    "dot-segments",
    "upper-host",
    "explicit-port",
    "absolute",
    "protocol-relative",
    "dot",
    "parent",
    "root-relative",
    "relative",
}


def test_every_link_form_is_present_and_resolves_to_its_target(web: SimWeb) -> None:
    forms: collections.Counter[str] = collections.Counter()
    with_base = 0
    for node in range(web.data.pages):
        url = web.url_of(node)
        base = web.base_href(url)
        with_base += base is not None
        for link in web.links(url):
            forms[form_of(link.href, web.config.port)] += 1
            if link.target is None:
                assert link.href.startswith(("mailto:", "javascript:"))
                continue
            assert resolve(base or url, link.href) == link.target, (url, base, link)
    assert set(forms) == ALL_FORMS, forms
    assert with_base > 20
    assert forms["explicit-port"] > 0  # http://host:80/ is spelled out even though 80 is the default


def test_links_resolve_on_a_non_default_port(web_8080: SimWeb) -> None:
    seen = 0
    for node in range(web_8080.data.pages):
        url = web_8080.url_of(node)
        for link in web_8080.links(url):
            if link.target is not None:
                assert resolve(web_8080.base_href(url) or url, link.href) == link.target
                seen += 1
    assert seen > 1000


def test_relative_links_resolve_against_base_href(web: SimWeb) -> None:
    checked = 0
    for node in range(web.data.pages):
        url = web.url_of(node)
        base = web.base_href(url)
        if base is None:
            continue
        assert f'<base href="{base}">' in web.body(url).decode()
        for link in web.links(url):
            if link.target and not link.href.startswith(("http", "/")):
                assert resolve(base, link.href) == link.target
                checked += 1
    assert checked > 20


def test_body_anchors_are_the_ground_truth_links(web: SimWeb) -> None:
    for node in range(0, web.data.pages, 37):
        url = web.url_of(node)
        tree = HTMLParser(web.body(url).decode())
        anchors = [
            (a.attributes.get("href"), a.text(), "nofollow" in (a.attributes.get("rel") or "")) for a in tree.css("a")
        ]
        assert anchors == [(link.href, link.anchor_text, link.nofollow) for link in web.links(url)]
        title = tree.css_first("title")
        assert title is not None and title.text()


def test_special_links(web: SimWeb) -> None:
    links = [link for node in range(web.data.pages) for link in web.links(web.url_of(node))]
    statuses = collections.Counter(web.status(link.target) for link in links if link.target)
    assert statuses[404] > 0 and statuses[500] + statuses[503] > 0
    assert {301, 302, 307, 308} <= set(statuses)
    nofollow_only = {link.target for link in links if link.nofollow} - {
        link.target for link in links if not link.nofollow
    }
    assert nofollow_only, "some pages are reachable only through rel=nofollow"
    assert all(link.anchor_text for link in links)
