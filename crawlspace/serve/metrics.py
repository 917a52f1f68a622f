"""/metrics: the crawl's figures in Prometheus's text format, named by its conventions.

A custom collector on a registry of its own (never the process-global default registry, which a
crawl attached to an application would share with it): each scrape reads the `CrawlView` as it is,
so the counters are the crawl's own (stats.json's once it finished), not counts kept here that
could drift from them. The histograms come from the crawl table's newest fetch of each URL (the
view's cached scan), so they describe the pages as stored rather than every attempt.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from crawlspace.serve.view import DURATION_BUCKETS, SIZE_BUCKETS, CrawlView

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STATES = ("starting", "running", "paused", "finished", "not reporting")


class CrawlCollector(Collector):
    def __init__(self, view: CrawlView) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        view = self.view
        view.refresh()
        counts = view.counts()
        latest = view.progress.latest or {}
        yield CounterMetricFamily(
            "crawlspace_pages_fetched", "Fetch attempts of frontier URLs (robots.txt not included).", counts["pages"]
        )
        yield CounterMetricFamily("crawlspace_bytes_downloaded", "Bytes of response bodies received.", counts["bytes"])
        responses = CounterMetricFamily("crawlspace_responses", "HTTP responses by status code.", labels=["status"])
        for status, n in sorted(counts["responses_by_status"].items()):
            responses.add_metric([str(status)], n)
        yield responses
        errors = CounterMetricFamily(
            "crawlspace_fetch_errors", "Attempts without a response, by kind.", labels=["kind"]
        )
        for kind, n in sorted(counts["errors"].items()):
            errors.add_metric([kind], n)
        yield errors
        yield CounterMetricFamily(
            "crawlspace_robots_excluded", "URLs not fetched because robots.txt forbids them.", counts["robots_excluded"]
        )
        yield CounterMetricFamily(
            "crawlspace_duplicate_content", "Pages whose body was an exact duplicate.", counts["duplicate_content"]
        )
        yield GaugeMetricFamily("crawlspace_frontier_urls", "URLs queued, not in flight.", latest.get("frontier", 0))
        yield GaugeMetricFamily("crawlspace_fetches_in_flight", "Fetches in flight.", latest.get("in_flight", 0))
        hosts = GaugeMetricFamily("crawlspace_hosts", "Hosts by state in the frontier.", labels=["state"])
        for state, key in (
            ("known", "known_hosts"),
            ("active", "active_hosts"),
            ("parked", "parked_hosts"),
            ("awaiting_address", "awaiting_address"),
        ):
            hosts.add_metric([state], latest.get(key, 0))
        yield hosts
        for cache, doc in (("dns", "host names"), ("robots", "robots.txt checks of URLs")):
            for outcome in ("hits", "misses"):
                yield CounterMetricFamily(
                    f"crawlspace_{cache}_cache_{outcome}",
                    f"{doc.capitalize()} answered {'from' if outcome == 'hits' else 'without'} the {cache} cache "
                    "(this run of the crawl).",
                    latest.get(f"{cache}_cache_{outcome}", 0),
                )
        delays = GaugeMetricFamily(
            "crawlspace_hosts_by_delay_cause",
            "Hosts with URLs queued, by what sets their delay (the frontier's last host report).",
            labels=["cause"],
        )
        for cause, n in sorted(view.host_files().summary()["by_cause"].items()):
            delays.add_metric([cause], n)
        yield delays
        yield GaugeMetricFamily(
            "crawlspace_pages_per_second",
            "Pages per second since the report before.",
            latest.get("pages_per_second_recent", 0.0),
        )
        state = view.state()
        states = GaugeMetricFamily(
            "crawlspace_crawl_state", "1 for the crawl's state, 0 for the others.", labels=["state"]
        )
        for name in STATES:
            states.add_metric([name], 1.0 if name == state else 0.0)
        yield states
        figures = view.figures()
        if figures is not None:
            yield _histogram(
                "crawlspace_fetch_duration_seconds",
                "Duration of each stored page's newest fetch that got a response.",
                DURATION_BUCKETS,
                figures.duration_counts,
                figures.duration_sum,
            )
            yield _histogram(
                "crawlspace_page_size_bytes",
                "Body size of each stored page's newest response.",
                SIZE_BUCKETS,
                figures.size_counts,
                float(figures.size_sum),
            )


def _histogram(name: str, doc: str, bounds: tuple[float, ...], counts: list[int], total: float) -> Metric:
    cumulative, buckets = 0, []
    for bound, n in zip(bounds, counts, strict=True):
        cumulative += n
        buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), cumulative))
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=total)


def registry_for(view: CrawlView) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CrawlCollector(view))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
