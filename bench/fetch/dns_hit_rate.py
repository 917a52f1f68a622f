"""DNS cache hit rate of a crawl of the simulated web, resolved through real DNS (c-ares).

The simulated web's host names are served by a scripted DNS server on loopback (UDP, TTL
`--ttl`), not by a hosts file, so every name the crawler needs goes through the resolver's
cache, prefetch, and c-ares, as on the real web. The crawl is a normal `CrawlEngine` run
(robots.txt, politeness, links, redirects to other hosts); the figures are the resolver's own
counters from stats.json: lookups sent to DNS, answers from the cache, and the hit rate
(cache answers / all answers that needed DNS).

Usage: python bench/fetch/dns_hit_rate.py [--hosts 200] [--pages 3000] [--ttl 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crawlspace.config import CrawlConfig  # noqa: E402
from crawlspace.crawl import CrawlEngine  # noqa: E402
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background  # noqa: E402
from tests.dns.fake_dns import FakeDNS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--pages", type=int, default=3000, help="stop the crawl after this many fetches")
    parser.add_argument("--ttl", type=int, default=300, help="TTL of every DNS answer, seconds")
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()

    import uvloop

    web = SimWeb.generate(SimWebConfig(hosts=args.hosts, robots_crawl_delay=0.05))
    with tempfile.TemporaryDirectory() as folder:
        with serve_in_background(web, Path(folder) / "simweb", seeds=args.seeds) as server, FakeDNS() as dns:
            for host in web.hosts:
                dns.set(host, addresses=[server.host_ip(host)], ttl=args.ttl)
            config = CrawlConfig(
                dns_servers=[dns.address],
                allow_networks=["127.0.0.0/8"],
                concurrency=64,
                min_delay=0.05,
                delay_factor=1.0,
                max_delay=0.5,
                max_pages=args.pages,
                max_seconds=600,
                progress_interval=10,
            )
            engine = CrawlEngine(config, Path(folder) / "crawl", live_progress=False)
            engine.add_seeds(server.seeds)
            uvloop.install()
            started = time.monotonic()
            asyncio.run(engine.run())
            elapsed = time.monotonic() - started
            queries = sum(dns.queries.values())
        stats = json.loads((Path(folder) / "crawl" / "stats.json").read_text())
    dns_stats = stats["dns"]
    print(
        f"simulated web: {args.hosts} hosts, crawl of {stats['pages_fetched']} fetches in {elapsed:.1f} s, "
        f"TTL {args.ttl} s"
    )
    print(
        f"resolver: {dns_stats['lookups']} lookups ({queries} DNS queries, A and AAAA), "
        f"{dns_stats['hits']} cache hits, "
        f"{dns_stats['negative_hits']} negative hits, {dns_stats['prefetches']} prefetches, "
        f"{dns_stats['failures']} failures"
    )
    print(f"DNS cache hit rate: {dns_stats['hit_rate']:.4f}")
    print(json.dumps({"dns": dns_stats, "elapsed": elapsed, "pages": stats["pages_fetched"]}))


if __name__ == "__main__":
    main()
