"""Parsing fetched documents: HTML links, anchor text, page text and robots directives; sitemaps.

Filled by the engine with each fetched HTML body (html.py) or sitemap file (sitemap.py); what
they return feeds the URL filter (links, canonical, refresh targets, sitemap URLs), the store
(title, text, anchor texts, noindex) and the engine's nofollow decision. Parsing is pure (bytes
in, data out), bounded in time and memory, and survives any input: it never raises.
"""

from crawlspace.parse.html import Link, ParsedPage, parse_html
from crawlspace.parse.sitemap import Sitemap, SitemapKind, parse_sitemap

__all__ = ["Link", "ParsedPage", "Sitemap", "SitemapKind", "parse_html", "parse_sitemap"]
