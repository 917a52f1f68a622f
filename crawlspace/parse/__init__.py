"""Parsing fetched documents: HTML links, anchor text, page text and robots directives.

Filled by the engine with each fetched HTML body; what it returns feeds "content seen?", the URL
filter and the store. Parsing is pure (bytes in, data out) and must survive any input.
"""

from crawlspace.parse.html import Link, ParsedPage, parse_html

__all__ = ["Link", "ParsedPage", "parse_html"]
