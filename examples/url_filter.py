"""URL filters: keep a crawl out of a spider trap by pattern, with the reason counted in stats.json.

    python examples/url_filter.py [OUT]         # default OUT: ./url-filter

One host of this simulated web has an endless calendar (/cal/2026/11/ links to the next month,
forever). The built-in guards would stop it after 30 levels (max_host_depth); a filter that knows
the site keeps the crawl out of it from the first link; another skips a section of mirrored
copies (known duplicates: fetching them costs the host and us for nothing). Filters see every URL (links, redirect
targets, seeds, processors' Follows) after the built-in filters, before duplicate elimination.
"""

import json
import re
import sys
from pathlib import Path

from crawlspace import CrawlConfig, Crawler, CrawlStats
from crawlspace.hooks import FrontierEntry
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background

WEB = SimWebConfig(hosts=25, seed=4, mean_pages_per_host=6, max_pages_per_host=40, robots_crawl_delay=0.05)
CALENDAR = re.compile(r"/cal/\d+/\d+/")


def no_calendars(entry: FrontierEntry) -> bool | str:
    """True: crawl it. A string: do not, and count it in stats.json filtered as "no_calendars:<string>"."""
    return "calendar" if CALENDAR.search(entry.url) else True


class SkipSections:
    """A filter as an object: settings, and a name of its own in stats.json."""

    name = "skip-sections"

    def __init__(self, *prefixes: str) -> None:
        self.prefixes = prefixes

    def __call__(self, entry: FrontierEntry) -> bool:
        path = "/" + entry.url.split("/", 3)[3]
        return not path.startswith(self.prefixes)  # False: counted as "skip-sections"


def main(out: Path) -> CrawlStats:
    web = SimWeb.generate(WEB)
    with serve_in_background(web, out / "simweb", seeds=5) as server:
        config = CrawlConfig(hosts_file=str(server.hosts_file), allow_private_addresses=True, min_delay=0.05)
        crawler = Crawler(
            config, out=out / "crawl", seeds=server.seeds, filters=[no_calendars, SkipSections("/mirror/")]
        )
        return crawler.run()


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "url-filter")
    stats = main(out)
    print(f"{stats.pages_fetched} pages fetched; filtered: {json.dumps(dict(stats.filtered))}")
