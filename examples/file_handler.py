"""A fetch protocol handler: crawl `file:` URLs, here a copy of the simulated web written to disk.

    python examples/file_handler.py [OUT]       # default OUT: ./file-handler

`handlers={"file": FileHandler(root)}` makes file: URLs crawlable: the normalizer and the scheme
filter accept them, the engine fetches them through the handler (no DNS, no robots.txt, no
per-host delay: the handler says `polite = False`), and from there on they are pages like any
other: stored in the WARC files and the crawl table, parsed, given to processors, their links
followed. Relative links stay in the directory tree; `scope = "prefix"` keeps the crawl under the
seed directory (the absolute http:// links of the pages point at the web, out of scope here).
"""

import json
import sys
from pathlib import Path

from crawlspace import CrawlConfig, Crawler, CrawlStats
from crawlspace.hooks import FileHandler, JsonlSink, Page
from crawlspace.simweb import SimWeb, SimWebConfig, export_static

WEB = SimWebConfig(hosts=6, seed=3, mean_pages_per_host=10, max_pages_per_host=40, include_trap=False)


def catalogue(page: Page):
    yield {
        "url": page.url,
        "status": page.status,
        "type": page.content_type,
        "title": page.title,
        "bytes": len(page.body),
    }


def main(out: Path) -> CrawlStats:
    web = SimWeb.generate(WEB)
    export_static(web, out / "mirror")  # every page of every host as files: hosts/<host>/<path>
    site = out / "mirror" / "hosts" / web.hosts[0]
    files = FileHandler(site)
    crawler = Crawler(
        CrawlConfig(scope="prefix"),
        out=out / "crawl",
        seeds=[files.url_of(site)],
        handlers={"file": files},
        processors=[catalogue],
        sinks=[JsonlSink(out / "files.jsonl")],
    )
    return crawler.run()


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "file-handler")
    stats = main(out)
    print(f"{stats.pages_fetched} file: URLs fetched, by status {json.dumps(dict(stats.responses_by_status))}")
