"""A prioritizer: home pages first, so that a crawl meets its hosts early (Mercator's front queues).

    python examples/prioritizer.py [OUT]        # default OUT: ./prioritizer

The frontier asks the prioritizer for a level (0 = most urgent) once per URL; when it needs a new
host for a back queue it draws from the front queues with weight 2^-level. The order only
matters when more hosts wait than there are back queues (3 per fetch slot), so this example
crawls 120 hosts with 4 fetch slots, once breadth-first and once with HomePagesFirst, and
compares, from the server's request log, how early the home pages (`/`) were fetched.
"""

import json
import statistics
import sys
from pathlib import Path

from crawlspace import CrawlConfig, Crawler
from crawlspace.hooks import FrontierEntry, Prioritizer
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background

WEB = SimWebConfig(
    hosts=120, seed=9, mean_pages_per_host=6, max_pages_per_host=30, robots_crawl_delay=0.02, include_trap=False
)


class HomePagesFirst:
    """Level 0 for a host's root URL, then by link depth: 1, 2, 3 and deeper."""

    levels = 4

    def priority(self, entry: FrontierEntry) -> int:
        path = entry.url.split("/", 3)[3]  # scheme:, "", host, path: normalized URLs have all four
        return 0 if path == "" else max(1, min(entry.depth, 3))


def crawl(out: Path, prioritizer: Prioritizer | None) -> float:
    """Crawl the web; the mean position of home-page requests in the server's log (0 first, 1 last)."""
    with serve_in_background(SimWeb.generate(WEB), out / "simweb", seeds=3) as web:
        config = CrawlConfig(
            hosts_file=str(web.hosts_file), allow_private_addresses=True, min_delay=0.02, concurrency=4
        )
        Crawler(config, out=out / "crawl", seeds=web.seeds, prioritizer=prioritizer).run()
        web.stop()
        requests = sorted((entry for entry in web.read_log() if entry.path != "/robots.txt"), key=lambda e: e.arrived)
    return statistics.mean(i / (len(requests) - 1) for i, entry in enumerate(requests) if entry.path == "/")


def main(out: Path) -> dict[str, float]:
    result = {
        "breadth_first": crawl(out / "bfs", None),
        "home_pages_first": crawl(out / "home-pages-first", HomePagesFirst()),
    }
    (out / "order.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "prioritizer")
    result = main(out)
    print("mean position of home-page requests (0 = first request, 1 = last):")
    for name, position in result.items():
        print(f"  {name:<17} {position:.3f}")
