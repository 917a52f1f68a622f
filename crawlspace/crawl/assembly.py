"""The composition root: every component of one crawl partition, built from its CrawlConfig.

The only place that reads configuration keys to build the crawl loop's parts, so the parts take
plain arguments (testable without a config, and the lower floors never import it) and the engine
takes parts (testable with fakes).
Layout of a crawl (or partition) directory: frontier/ (the checkpoint's commit point), journal/,
seen/urls, seen/content, robots/robots.log, warc/ (or the partitions' shared one), table/.

A new crawl starts with empty stores (`resume=False` resets what an earlier crawl left there);
a resumed one reopens them as they are and the engine replays its journal on top.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crawlspace.config import CrawlConfig
from crawlspace.crawl.handoff import PageHandOff
from crawlspace.crawl.ledger import Ledger
from crawlspace.crawl.links import LinkPipeline
from crawlspace.crawl.partition import PartitionInbox
from crawlspace.crawl.prefetch import DnsPrefetch
from crawlspace.crawl.recorder import FetchRecorder
from crawlspace.crawl.resume import ResumeState
from crawlspace.crawl.robotsgate import RobotsGate
from crawlspace.crawl.telemetry import CrawlStats
from crawlspace.distributed.assignment import Assignment, ModuloAssignment
from crawlspace.distributed.protocols import Peers
from crawlspace.distributed.router import PartitionRouter
from crawlspace.dns import AddressGuard, Resolver
from crawlspace.dns.resolver import Backoff
from crawlspace.fetch import Fetcher
from crawlspace.fetch.fetcher import FetchLimits
from crawlspace.fetch.retry import RetryPolicy
from crawlspace.frontier import Frontier, FrontierEntry, Politeness, Prioritizer
from crawlspace.hooks.runtime import Extensions
from crawlspace.policies import as_policy, make_policy
from crawlspace.policies.base import OrderingPolicy
from crawlspace.robots import RobotsCache
from crawlspace.robots.persist import LOG_NAME, RobotsLog
from crawlspace.seen import ContentSeen, RunStore, UrlSet
from crawlspace.store import PageStore, StoreOptions
from crawlspace.urls import Normalizer
from crawlspace.urls.filter import Scope, UrlFilter
from crawlspace.urls.fingerprint import UrlFingerprints


@dataclass
class Components:
    """The parts of one crawl partition, before the stages that use them are wired."""

    politeness: Politeness
    policy: OrderingPolicy
    frontier: Frontier
    robots: RobotsCache
    robots_log: RobotsLog
    urlset: UrlSet[FrontierEntry]
    pinned_urls: RunStore  # URLs of hosts pinned here (per-IP politeness) queued here: the forwards' test
    content: ContentSeen
    normalizer: Normalizer
    url_filter: UrlFilter
    resolver: Resolver
    guard: AddressGuard
    retry: RetryPolicy
    store: PageStore


def resolver(config: CrawlConfig) -> Resolver:
    return Resolver(
        overrides=config.resolve,
        hosts_file=config.hosts_file,
        nameservers=config.dns_servers,
        min_ttl=config.dns_min_ttl,
        max_ttl=config.dns_max_ttl,
        negative_ttl=config.dns_negative_ttl,
        timeout=config.dns_timeout,
        backoff=Backoff(config.dns_retry_attempts, config.dns_retry_initial, config.dns_retry_max),
    )


def guard(config: CrawlConfig) -> AddressGuard:
    return AddressGuard(allow_private=config.allow_private_addresses, allow_networks=config.allow_networks)


def fetcher(
    config: CrawlConfig, resolver: Resolver, guard: AddressGuard, *, spill_dir: str | Path | None = None
) -> Fetcher:
    """`spill_dir`: where bodies beyond `spill_bytes` wait for their turn (the crawl directory: /tmp is
    often a RAM disk)."""
    return Fetcher(
        resolver,
        guard,
        user_agent=config.user_agent,
        from_header=config.from_header,
        max_connections=config.concurrency,
        max_conn_per_host=config.max_conn_per_host,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        total_timeout=config.total_timeout,
        keepalive_timeout=config.keepalive_timeout,
        limits=FetchLimits(
            max_body_bytes=config.max_body_bytes,
            max_decoded_bytes=config.max_decoded_bytes,
            max_compression_ratio=config.max_compression_ratio,
            max_response_headers=config.max_response_headers,
            max_header_bytes=config.max_header_bytes,
        ),
        verify_tls=config.verify_tls,
        spill_bytes=config.spill_bytes,
        spill_dir=spill_dir,
    )


def store_options(config: CrawlConfig) -> StoreOptions:
    return StoreOptions(
        warc_max_bytes=config.warc_max_bytes,
        warc_prefix=config.warc_prefix,
        warc_compression_level=config.warc_compression_level,
        store_text=config.store_text,
        max_versions={
            "title": config.table_title_versions,
            "content": config.table_content_versions,
            "fetch": config.table_fetch_versions,
            "anchor": config.table_anchor_versions,
        },
        flush_pages=config.store_flush_pages,
        flush_seconds=config.store_flush_seconds,
        sync=config.store_sync,
    )


def url_filter(config: CrawlConfig) -> UrlFilter:
    """The filter chain a crawl configuration asks for (seeds are added by the link pipeline)."""
    return UrlFilter(
        scope=Scope(config.scope, config.allowed_domains),
        schemes=config.allowed_schemes,
        include=config.include,
        exclude=config.exclude,
        exclude_extensions=config.exclude_extensions,
        max_depth=config.max_depth,
        max_redirects=config.max_redirects,
        max_url_length=config.max_url_length,
        max_path_depth=config.max_path_depth,
        max_segment_repeats=config.max_segment_repeats,
        max_query_params=config.max_query_params,
        host_page_budget=config.host_page_budget,
        max_host_depth=config.max_host_depth,
    )


def politeness(config: CrawlConfig) -> Politeness:
    return Politeness(
        min_delay=config.min_delay,
        delay_factor=config.delay_factor,
        max_delay=config.max_delay,
        max_conn_per_host=config.max_conn_per_host,
        per_ip=config.per_ip,
        max_conn_per_ip=config.max_conn_per_ip,
        error_delay=config.error_delay,
        park_after_errors=config.park_after_errors,
        park_seconds=config.park_seconds,
        give_up_after_parks=config.give_up_after_parks,
    )


def assemble(
    config: CrawlConfig,
    out_dir: Path,
    *,
    resume: bool,
    extensions: Extensions,
    prioritizer: Prioritizer | None,
    on_host_activated: Callable[[str], None],
    partitions: int = 1,
    shared_warc_dir: Path | None = None,
    url_fingerprints: UrlFingerprints | None = None,
) -> Components:
    """Open (or create) every store of a partition under `out_dir`.

    `extensions`: the user's filters, processors, sinks and protocol handlers; their schemes are
    crawlable (normalized, let through the scheme filter, followed). `prioritizer`: the crawl
    order instead of `config.policy`, fed page events if it is an ordering policy.
    `on_host_activated`: the frontier gave a host a back queue (the engine looks up its address).
    `partitions`: the crawl's, which share the URL-seen cache budget. `url_fingerprints`: the
    crawl's (crawl.partitioning), which a partition's URL set must have (None: a new set's default)."""
    polite = politeness(config)
    policy = as_policy(prioritizer) if prioritizer is not None else make_policy(config)
    frontier = Frontier.open(
        out_dir / "frontier",
        polite,
        fresh=not resume,
        back_queues=config.back_queues or 3 * config.concurrency,
        prioritizer=policy.prioritizer,
        front_window=config.frontier_front_window,
        back_window=config.frontier_back_window,
        on_activate=on_host_activated,
    )
    robots_dir = out_dir / "robots"
    if not resume:
        (robots_dir / LOG_NAME).unlink(missing_ok=True)
    seen_dir = out_dir / "seen"
    chain = url_filter(config)
    chain.schemes |= extensions.schemes
    return Components(
        politeness=polite,
        policy=policy,
        frontier=frontier,
        robots=RobotsCache(ttl=config.robots_ttl, retry_delay=config.robots_retry_delay),
        robots_log=RobotsLog(robots_dir, ttl=config.robots_ttl),
        urlset=UrlSet.open(
            seen_dir / "urls",
            cache_bytes=config.seen_cache_bytes // partitions // 2,  # the crawl's budget, shared (half for links.py's)
            buffer_urls=config.seen_buffer_urls,
            reset=not resume,
            scheme=url_fingerprints,
        ),
        pinned_urls=RunStore(seen_dir / "pinned", memtable_limit=1 << 16, reset=not resume),
        content=ContentSeen(seen_dir / "content", near_threshold=config.near_duplicate_threshold, reset=not resume),
        normalizer=Normalizer(
            strip_session_ids=config.strip_session_ids,
            strip_tracking=config.strip_tracking_params,
            strip_params=config.strip_params,
            sort_query=config.sort_query,
            extra_schemes=extensions.schemes,
        ),
        url_filter=chain,
        resolver=resolver(config),
        guard=guard(config),
        retry=RetryPolicy(
            max_retries=config.max_retries, initial_delay=config.retry_delay, statuses=frozenset(config.retry_statuses)
        ),
        store=PageStore(
            out_dir,
            store_options(config),
            warcinfo={"http-header-user-agent": config.user_agent, "robots": "obey", "isPartOf": out_dir.name},
            warc_dir=shared_warc_dir,
            recover=shared_warc_dir is None,  # a shared WARC directory is recovered before the partitions start
        ),
    )


@dataclass
class Stages:
    """The stages of the crawl loop around the engine's dispatch (see crawl/__init__.py)."""

    router: PartitionRouter | None
    links: LinkPipeline
    recorder: FetchRecorder
    robots_gate: RobotsGate
    handoff: PageHandOff
    prefetch: DnsPrefetch
    resume_state: ResumeState
    partition: PartitionInbox | None  # with several partitions: the engine's side of the transport


def stages(
    config: CrawlConfig,
    parts: Components,
    *,
    stats: CrawlStats,
    ledger: Ledger,
    extensions: Extensions,
    peers: Peers | None,
    assignment: Assignment | None,
    wake: Callable[[], None],
    send_batches: Callable[[], None],
    send_soon: Callable[[], None],
    stop: Callable[[str], None],
    stopping: Callable[[], bool],
) -> Stages:
    """Wire the stages over the components: they share `stats` (a resumed crawl's, when resuming) and
    write to `ledger`. `wake`: URLs, addresses or processed pages may let the dispatcher go on;
    `send_batches`: a batch for another partition is full; `send_soon`: one is open (sent within the
    partition's send interval); `stop`: the cluster stops the crawl;
    `stopping`: is the crawl stopping (no DNS prefetch then)."""
    router = None
    if peers is not None:
        owners = assignment or ModuloAssignment(peers.partitions)
        router = PartitionRouter(peers.index, owners, ledger, per_ip=config.per_ip)
    links = LinkPipeline(
        normalizer=parts.normalizer,
        url_filter=parts.url_filter,
        extensions=extensions,
        policy=parts.policy,
        urlset=parts.urlset,
        pinned_urls=parts.pinned_urls,
        frontier=parts.frontier,
        router=router,
        ledger=ledger,
        stats=stats,
        sitemap_max_files=config.sitemap_max_files,
        recent_cache_bytes=config.seen_cache_bytes // (2 * (peers.partitions if peers is not None else 1)),
        wake=wake,
        send_batches=send_batches,
        send_soon=send_soon,
    )
    recorder = FetchRecorder(
        config,
        store=parts.store,
        content=parts.content,
        normalizer=parts.normalizer,
        ledger=ledger,
        stats=stats,
        policy_reads_pages=parts.policy.observes_pages,
        partitions=peers.partitions if peers is not None else 1,
    )
    robots_gate = RobotsGate(
        parts.robots,
        parts.robots_log,
        agent=config.robots_agent,
        max_retries=config.robots_max_retries,
        follow_sitemaps=config.sitemaps,
        store=parts.store,
        ledger=ledger,
        stats=stats,
    )
    handoff = PageHandOff(extensions, recorder, links, max_body_bytes=config.max_body_bytes, wake=wake)
    prefetch = DnsPrefetch(parts.resolver, parts.frontier, stats, wake=wake, stopping=stopping)
    resume_state = ResumeState(
        stats=stats, url_filter=parts.url_filter, links=links, robots_gate=robots_gate, router=router
    )
    partition = None
    if peers is not None and router is not None:
        partition = PartitionInbox(
            peers, router, links=links, ledger=ledger, content=parts.content, stats=stats, wake=wake, stop=stop
        )
        # a page's replaced version is told to every other partition (distributed.outdated)
        parts.content.outdated_peers = tuple(peer for peer in range(peers.partitions) if peer != peers.index)
    return Stages(router, links, recorder, robots_gate, handoff, prefetch, resume_state, partition)
