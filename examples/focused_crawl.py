"""The shortest useful program: a focused crawl of the simulated web that writes the pages mentioning a word to JSONL.

    python examples/focused_crawl.py [OUT]      # default OUT: ./focused-crawl

It starts the simulated web on loopback (a subprocess), crawls it politely from 5 seeds, and
keeps, as one JSON line each, the pages whose text mentions WORD.
"""

import re
import sys
from pathlib import Path

from crawlspace import CrawlConfig, Crawler, CrawlStats
from crawlspace.hooks import JsonlSink, Page
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background

WORD = "fleafio"  # the simulated web's text is pseudo-words; this one is on about a third of its pages
WEB = SimWebConfig(hosts=25, seed=8, mean_pages_per_host=8, max_pages_per_host=40, robots_crawl_delay=0.05, include_trap=False)


def mentions(page: Page):
    count = re.findall(r"\w+", page.text.lower()).count(WORD)
    if page.ok and count:
        yield {"url": page.url, "title": page.title, "depth": page.depth, "mentions": count}


def main(out: Path) -> CrawlStats:
    with serve_in_background(SimWeb.generate(WEB), out / "simweb", seeds=5) as web:
        config = CrawlConfig(hosts_file=str(web.hosts_file), allow_private_addresses=True, min_delay=0.05)
        crawler = Crawler(
            config, out=out / "crawl", seeds=web.seeds, processors=[mentions], sinks=[JsonlSink(out / "pages.jsonl")]
        )
        return crawler.run()


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "focused-crawl")
    stats = main(out)
    found = len((out / "pages.jsonl").read_text().splitlines())
    print(f"{stats.pages_fetched} pages fetched in {stats.elapsed:.1f} s; {found} mention {WORD!r}: {out / 'pages.jsonl'}")
