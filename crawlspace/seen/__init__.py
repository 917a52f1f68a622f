"""The two "seen?" tests of the crawl loop: duplicate URL elimination and content seen.

The engine submits every normalized link of a page to the URL set; only URLs never submitted
before go on to the frontier. Every fetched body is checked against the content set; a body
already seen at another URL is recorded as a duplicate and its links are not extracted again.
"""

from crawlspace.seen.content import ContentSeen
from crawlspace.seen.urlset import UrlSet

__all__ = ["ContentSeen", "UrlSet"]
