"""The Scrapy side of the throughput benchmark: a broad-crawl CrawlSpider that follows every link.

Run with the benchmark's own Scrapy environment (bench/.venv-scrapy), never imported by crawlspace. Host
names resolve from the simulated web's hosts file through a resolver class below, so /etc/hosts is untouched.
Settings follow Scrapy's broad-crawl advice: robots.txt obeyed, no download delay, one connection per domain
(the same per-host limit as crawlspace), the downloader-aware priority queue, cookies and retries off.
"""

from __future__ import annotations

import argparse
import sys

from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor
from scrapy.resolver import CachingThreadedResolver
from scrapy.spiders import CrawlSpider, Rule
from twisted.internet import defer

HOSTS: dict[str, str] = {}
PRODUCT_TOKEN = "scrapy-bench"  # the robots.txt agent the benchmark judges Scrapy by


class HostsFileResolver(CachingThreadedResolver):
    def getHostByName(self, name, timeout=()):
        address = HOSTS.get(name.lower())
        if address is not None:
            return defer.succeed(address)
        return super().getHostByName(name, timeout)


class BroadSpider(CrawlSpider):
    name = "broad"
    rules = (Rule(LinkExtractor(), follow=True),)

    def __init__(self, seeds: list[str], **kwargs):
        super().__init__(**kwargs)
        self.start_urls = seeds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", required=True)
    parser.add_argument("--hosts-file", required=True)
    parser.add_argument("--pages", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=256)
    args = parser.parse_args()
    with open(args.hosts_file, encoding="utf-8") as hosts:
        for line in hosts:
            fields = line.split()
            for name in fields[1:]:
                HOSTS[name.lower()] = fields[0]
    with open(args.seeds, encoding="utf-8") as seeds_file:
        seeds = [line.strip() for line in seeds_file if line.strip()]
    process = CrawlerProcess(
        settings={
            "ROBOTSTXT_OBEY": True,
            "DOWNLOAD_DELAY": 0,
            "CONCURRENT_REQUESTS": args.concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
            "DNS_RESOLVER": "__main__.HostsFileResolver",
            "CLOSESPIDER_PAGECOUNT": args.pages,
            "COOKIES_ENABLED": False,
            "RETRY_ENABLED": False,
            "TELNETCONSOLE_ENABLED": False,
            "LOG_LEVEL": "INFO",
            "USER_AGENT": f"{PRODUCT_TOKEN} (+https://scrapy.org)",
            "REACTOR_THREADPOOL_MAXSIZE": 20,
        }
    )
    process.crawl(BroadSpider, seeds=seeds)
    process.start()


if __name__ == "__main__":
    sys.exit(main())
