"""The shortest useful program: a focused crawl of the simulated web, writing the pages on its topic to JSONL.

    python examples/focused_crawl.py [OUT]      # default OUT: ./focused-crawl

It starts the simulated web on loopback and crawls it politely from 5 seeds. With
`follow_links=False` the crawler follows no link by itself: the processor keeps the pages that
mention WORD and follows the links of those pages only (and of the seeds, to get going).
"""

import re
import sys
from pathlib import Path

from crawlspace import CrawlConfig, Crawler
from crawlspace.hooks import Follow, JsonlSink, Page
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background

WORD = "fleafio"  # the simulated web's text is pseudo-words; this one is on about a third of its pages
WEB = SimWebConfig(hosts=25, seed=8, mean_pages_per_host=8, include_trap=False, robots_crawl_delay=0.05)


def on_topic(page: Page):
    mentions = re.findall(r"\w+", page.text.lower()).count(WORD)
    if mentions:
        yield {"url": page.url, "title": page.title, "mentions": mentions}
    if mentions or page.depth == 0:
        yield from (Follow(link.url) for link in page.links if not link.nofollow)


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "focused-crawl")
    with serve_in_background(SimWeb.generate(WEB), out / "simweb", seeds=5) as web:
        config = CrawlConfig(
            follow_links=False, hosts_file=str(web.hosts_file), allow_private_addresses=True, min_delay=0.05
        )
        stats = Crawler(
            config, out=out / "crawl", seeds=web.seeds, processors=[on_topic], sinks=[JsonlSink(out / "pages.jsonl")]
        ).run()
    found = len((out / "pages.jsonl").read_text().splitlines())
    print(f"{stats.pages_fetched} pages fetched, {found} on topic: {out / 'pages.jsonl'}")
