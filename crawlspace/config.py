"""Typed, validated, immutable crawl configuration.

One flat set of keys, each with its type, bounds and documentation in one place, so that a TOML
file, the CLI and the Python API all go through the same validation, and the configuration
reference (docs) is generated from this class and cannot drift. A misspelled key is an error that
names the closest valid key: silent string settings are what we do not copy from Scrapy.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from crawlspace.parse.html import MAX_LINKS, MAX_TEXT_CHARS
from crawlspace.urls.filter import (
    HOST_PAGE_BUDGET,
    IGNORED_EXTENSIONS,
    MAX_HOST_DEPTH,
    MAX_PATH_DEPTH,
    MAX_QUERY_PARAMS,
    MAX_SEGMENT_REPEATS,
    MAX_URL_LENGTH,
)

DEFAULT_ROBOTS_AGENT = "crawlspace"
DEFAULT_USER_AGENT = "crawlspace/0.1 (+https://github.com/crawlspace/crawlspace; crawler)"


class ConfigError(ValueError):
    """A configuration that cannot be used, with the reason in one line."""


class UnknownKeyError(ConfigError, TypeError):
    """A key CrawlConfig does not have. Also a TypeError, which Python code expects from a bad keyword."""


def check_keys(keys: typing.Iterable[str], valid: typing.Collection[str], *, source: str) -> None:
    """The one check of key names, for a TOML file, a CLI override, keyword construction and `replace`:
    the first unknown key is an error naming the closest valid one."""
    for key in keys:
        if key not in valid:
            close = difflib.get_close_matches(key, list(valid), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UnknownKeyError(f"{source}: unknown key {key!r}{hint}")


class _KeyCheckedStruct(msgspec.StructMeta):
    """Runs `check_keys` before msgspec's own constructor, whose TypeError names no alternative."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        check_keys(kwargs, cls.__struct_fields__, source=cls.__name__)
        return super().__call__(*args, **kwargs)


def _doc(text: str, **bounds: Any) -> msgspec.Meta:
    return msgspec.Meta(description=text, **bounds)


PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]


class CrawlConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, metaclass=_KeyCheckedStruct):
    """Everything a crawl can be told. Keys are the same in TOML, in Python and (with dashes) on the CLI."""

    # identity
    user_agent: Annotated[str, _doc("User-Agent header sent with every request: product token and contact URL.")] = (
        DEFAULT_USER_AGENT
    )
    robots_agent: Annotated[
        str,
        _doc("Product token matched against robots.txt User-agent groups (RFC 9309). Defaults to crawlspace's own."),
    ] = DEFAULT_ROBOTS_AGENT
    from_header: Annotated[
        str | None, _doc("Value of the From header (an e-mail address to contact the operator).")
    ] = None

    # termination
    max_pages: Annotated[PositiveInt | None, _doc("Stop after this many fetches (None: no limit).")] = None
    max_seconds: Annotated[PositiveFloat | None, _doc("Stop after this many seconds of crawling (None: no limit).")] = (
        None
    )
    max_bytes: Annotated[
        PositiveInt | None, _doc("Stop after this many body bytes were downloaded (None: no limit).")
    ] = None

    # concurrency and politeness
    concurrency: Annotated[
        int, _doc("Fetches in flight at once across all hosts (per process when there are several).", ge=1, le=100_000)
    ] = 64
    processes: Annotated[
        PositiveInt | None,
        _doc(
            "Crawl processes, each owning a hash partition of the hosts (IIR's host splitter). None: one per CPU "
            "core, or one when Python extensions (processors, sinks, filters, handlers, a prioritizer) are given. "
            "A crawl of 2 or more resumed with another number of 2 or more hands its hosts over to their new "
            "owners first (docs/architecture.md, Resizing)."
        ),
    ] = None
    min_delay: Annotated[
        float,
        _doc("Least seconds between two requests to one host; robots.txt Crawl-delay can only lengthen it.", ge=0),
    ] = 1.0
    delay_factor: Annotated[
        float, _doc("Mercator's k: the next request to a host waits k times the last fetch's duration.", ge=0)
    ] = 10.0
    max_delay: Annotated[float, _doc("Upper bound in seconds of the delay between requests to one host.", ge=0)] = 60.0
    max_conn_per_host: Annotated[int, _doc("Requests in flight at once to one host.", ge=1, le=64)] = 1
    per_ip: Annotated[
        bool,
        _doc(
            "Per-IP politeness: hosts resolving to one address share its connection limit and delay "
            "(the delay without Crawl-delay, which is per host)."
        ),
    ] = True
    max_conn_per_ip: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=1024)] | None,
        _doc(
            "With per_ip, requests in flight at once to one address; the address's delay is divided by it "
            "(None: max_conn_per_host). Raise it for crawls of many sites on one CDN address."
        ),
    ] = None
    error_delay: Annotated[
        float,
        _doc(
            "Seconds of backoff after a failed fetch (connection error, timeout, 5xx, 429), doubled per repeat.",
            ge=0,
        ),
    ] = 5.0
    park_after_errors: Annotated[
        int, _doc("Consecutive failed fetches after which a host is parked (set aside) for park_seconds.", ge=1)
    ] = 5
    park_seconds: Annotated[
        float, _doc("Seconds a failing host is parked the first time; doubled each time it is parked again.", ge=0)
    ] = 900.0
    give_up_after_parks: Annotated[
        int,
        _doc("A host still failing after this many parks is given up: its URLs are dropped and counted.", ge=0),
    ] = 3
    back_queues: Annotated[
        PositiveInt | None,
        _doc("Hosts served at once by the frontier (its B back queues; None: 3 x concurrency, Mercator's rule)."),
    ] = None
    frontier_front_window: Annotated[
        int, _doc("URLs of each front (priority) queue kept in memory; the rest are compressed blocks on disk.", ge=16)
    ] = 4096
    frontier_back_window: Annotated[
        int, _doc("URLs of each back (per-host) queue kept in memory before spilling a block to disk.", ge=4)
    ] = 64

    # network
    resolve: Annotated[
        dict[str, str], _doc("Fixed host name to IP address mappings, consulted before the hosts file and DNS.")
    ] = {}
    hosts_file: Annotated[str | None, _doc("A hosts file (format of /etc/hosts) consulted before /etc/hosts.")] = None
    allow_private_addresses: Annotated[
        bool, _doc("Allow fetching from loopback, private and link-local addresses (refused by default: SSRF).")
    ] = False
    connect_timeout: Annotated[float, _doc("Seconds to establish a TCP (and TLS) connection.", gt=0)] = 10.0
    read_timeout: Annotated[float, _doc("Seconds without receiving a byte before a fetch is abandoned.", gt=0)] = 30.0
    total_timeout: Annotated[float, _doc("Seconds a whole fetch may take, body included.", gt=0)] = 60.0
    max_body_bytes: Annotated[int, _doc("Bodies are truncated (and marked so) beyond this many bytes.", ge=1024)] = (
        10 * 1024 * 1024
    )
    allow_networks: Annotated[
        list[str],
        _doc("CIDR networks that may be fetched although not public (e.g. 10.1.0.0/16); narrower than allowing all."),
    ] = []
    dns_servers: Annotated[
        list[str], _doc("Name servers to ask (IP or IP:port); empty: those of /etc/resolv.conf.")
    ] = []
    dns_timeout: Annotated[float, _doc("Seconds to wait for one DNS answer before trying again.", gt=0)] = 5.0
    dns_min_ttl: Annotated[float, _doc("Least seconds a DNS answer is cached, whatever its TTL.", ge=0)] = 60.0
    dns_max_ttl: Annotated[float, _doc("Most seconds a DNS answer is cached, whatever its TTL.", gt=0)] = 86400.0
    dns_negative_ttl: Annotated[
        float, _doc("Seconds a host that does not resolve is remembered as such (its URLs fail at once).", gt=0)
    ] = 3600.0
    dns_retry_attempts: Annotated[
        int, _doc("Lookups of a host whose DNS times out before it is given up (Mercator: about five).", ge=1, le=20)
    ] = 5
    dns_retry_initial: Annotated[float, _doc("Seconds before the second lookup of a timed-out host.", gt=0)] = 1.0
    dns_retry_max: Annotated[
        float, _doc("Seconds before the last lookup; the waits grow geometrically up to it.", gt=0)
    ] = 90.0
    verify_tls: Annotated[bool, _doc("Verify HTTPS certificates and host names (off only for testing).")] = True
    keepalive_timeout: Annotated[
        float, _doc("Seconds an idle keep-alive connection to a host is kept for its next request.", ge=0)
    ] = 15.0
    max_decoded_bytes: Annotated[
        int, _doc("Content-Encoding is undone up to this many bytes; beyond, the body is truncated.", ge=1024)
    ] = 10 * 1024 * 1024
    spill_bytes: Annotated[
        int,
        _doc(
            "A body, or its decoded content, beyond this many bytes is written to an unnamed temporary file in the "
            "crawl directory as it arrives instead of being held in memory until its page is processed: bodies in "
            "flight take at most concurrency x 2 x this much memory, whatever their size.",
            ge=64 * 1024,
        ),
    ] = 1024 * 1024
    max_compression_ratio: Annotated[
        float, _doc("Decoded-to-encoded size ratio beyond which a body (over 1 MiB decoded) is a bomb.", ge=2)
    ] = 100.0
    max_response_headers: Annotated[int, _doc("Most header fields a response may have.", ge=16, le=100_000)] = 256
    max_header_bytes: Annotated[int, _doc("Longest status line or header field in bytes.", ge=1024, le=1 << 20)] = (
        16 * 1024
    )
    max_retries: Annotated[
        int, _doc("Further attempts at a URL after a transient failure (timeout, reset, Retry-After).", ge=0, le=20)
    ] = 3
    retry_delay: Annotated[
        float, _doc("Seconds the host rests before the first retry; doubled for each later one.", ge=0)
    ] = 30.0
    retry_statuses: Annotated[
        list[int],
        _doc("HTTP statuses retried like network failures (e.g. [500, 502, 504]); 429/503 with Retry-After always."),
    ] = []
    parse_content_types: Annotated[
        list[str], _doc("Media types parsed for links; other types are stored (status, type, size) only.")
    ] = msgspec.field(default_factory=lambda: ["text/html", "application/xhtml+xml"])

    # robots.txt
    robots_ttl: Annotated[float, _doc("Seconds a fetched robots.txt stays valid in the per-host cache.", gt=0)] = (
        86400.0
    )
    robots_retry_delay: Annotated[
        float,
        _doc(
            "Seconds before retrying a robots.txt that was unreachable (5xx, 429, network error); doubles with "
            "each consecutive failure, up to robots_ttl. The host is treated as disallowed meanwhile.",
            gt=0,
        ),
    ] = 120.0
    robots_max_retries: Annotated[
        int,
        _doc(
            "Retries of an unreachable robots.txt (5xx, 429, timeouts) during which the host's URLs wait in the "
            "frontier; after them its URLs are dropped (robots_unreachable in stats.json). 0: drop at once. "
            "A crawl with nothing else to do ends without waiting (robots_waiting in stats.json).",
            ge=0,
            le=100,
        ),
    ] = 3
    sitemaps: Annotated[
        bool,
        _doc(
            "Fetch the sitemaps named in robots.txt (indexes and gzip included); their URLs go through the same "
            "filters as links. Off by default, as in Heritrix and Nutch: it adds requests the links do not ask for."
        ),
    ] = False
    sitemap_max_files: Annotated[
        int, _doc("Sitemap files (robots.txt entries and sitemap-index children) fetched per host.", ge=0)
    ] = 100
    sitemap_max_urls: Annotated[
        int, _doc("URLs taken from one sitemap file (the sitemaps.org limit is 50,000).", ge=1)
    ] = 50_000
    sitemap_max_bytes: Annotated[
        int, _doc("Uncompressed bytes read from one sitemap file (sitemaps.org: 50 MB); the rest is ignored.", ge=1024)
    ] = 50_000_000

    # seen sets
    seen_cache_bytes: Annotated[
        int,
        _doc(
            "Memory for the caches of URL fingerprints that drop repeated links before the disk-resident URL set "
            "(8.25 bytes per fingerprint): half for the recent and popular URLs of the set, half for the URLs "
            "submitted recently; shared by the crawl's processes; 0 disables them.",
            ge=0,
            le=1 << 40,
        ),
    ] = 16 << 20
    seen_buffer_urls: Annotated[
        int,
        _doc(
            "New URLs held back and then checked in one batch against the disk URL set; they reach the frontier "
            "after the check: when the buffer is full, when the frontier runs low, or at a checkpoint.",
            ge=1,
            le=100_000_000,
        ),
    ] = 65_536
    near_duplicate_threshold: Annotated[
        float,
        _doc("Estimated Jaccard similarity of word 4-shingles from which a page is a near-duplicate.", gt=0, le=1),
    ] = 0.9
    store_near_duplicates: Annotated[
        bool,
        _doc(
            "Write near-duplicate pages to the WARC files; when false only the duplicate-of relation is kept "
            "(DIR/seen/content), and an exact copy of such a page is a near-duplicate too (not stored). Exact "
            "duplicates are always written as revisit records of a stored response."
        ),
    ] = True

    # scope
    scope: Annotated[
        Literal["any", "host", "domain", "prefix"],
        _doc(
            "Which URLs the crawl may leave its seeds for: any (the whole web), host (the seeds' hosts), "
            "domain (the seeds' registered domains, by the Public Suffix List) or prefix (URLs under a "
            "seed's directory). A seed's redirect widens the scope to its target."
        ),
    ] = "any"
    allowed_domains: Annotated[
        tuple[str, ...], _doc("If not empty, only hosts in these domains (or their subdomains) are crawled.")
    ] = ()
    include: Annotated[
        tuple[str, ...],
        _doc("Regular expressions (Python syntax, searched in the URL): if any is given, a URL must match one."),
    ] = ()
    exclude: Annotated[tuple[str, ...], _doc("Regular expressions: a URL matching any of them is not crawled.")] = ()
    allowed_schemes: Annotated[
        tuple[Literal["http", "https"], ...],
        _doc("URL schemes crawled; the schemes of protocol handlers given to Crawler(handlers=...) are added."),
    ] = ("http", "https")
    exclude_extensions: Annotated[
        tuple[str, ...],
        _doc("File extensions (of the last path segment) not fetched: images, media, archives, office documents."),
    ] = IGNORED_EXTENSIONS
    max_depth: Annotated[
        NonNegativeInt | None, _doc("Links further than this many hops from a seed are not followed.")
    ] = None
    max_redirects: Annotated[int, _doc("Redirect hops followed from one original URL.", ge=0)] = 10
    max_url_length: Annotated[
        PositiveInt | None, _doc("Spider-trap guard: longer URLs (normalized, in characters) are not crawled.")
    ] = MAX_URL_LENGTH
    max_path_depth: Annotated[
        PositiveInt | None, _doc("Spider-trap guard: URLs with more path segments are not crawled.")
    ] = MAX_PATH_DEPTH
    max_segment_repeats: Annotated[
        PositiveInt | None,
        _doc("Spider-trap guard: a run of path segments repeated more often in a row (/a/b/a/b/a/b) is a trap."),
    ] = MAX_SEGMENT_REPEATS
    max_query_params: Annotated[
        PositiveInt | None, _doc("Spider-trap guard: URLs with more query parameters are not crawled.")
    ] = MAX_QUERY_PARAMS
    host_page_budget: Annotated[
        PositiveInt | None, _doc("Spider-trap guard: URLs admitted to the frontier per host; later ones are dropped.")
    ] = HOST_PAGE_BUDGET
    max_host_depth: Annotated[
        NonNegativeInt | None,
        _doc(
            "Spider-trap guard: links are not followed more than this many hops below the shallowest known URL "
            "of their host (endless calendars and 'next page' chains)."
        ),
    ] = MAX_HOST_DEPTH
    max_links_per_page: Annotated[int, _doc("Links taken from one page; the rest are dropped.", ge=0)] = MAX_LINKS
    max_text_chars: Annotated[
        int,
        _doc(
            "Characters of a page's extracted text kept (before whitespace is collapsed): what is shingled for "
            "near-duplicates, stored with store_text and given to policies and processors. The rest of a longer "
            "page's text is dropped (its links are all extracted): it bounds the memory and time of those stages.",
            ge=1024,
        ),
    ] = MAX_TEXT_CHARS
    follow_links: Annotated[
        bool,
        _doc(
            "Follow the links of fetched pages. False: only seeds, redirect targets and the URLs that page "
            "processors emit (Follow) are crawled: a processor then decides, e.g. a focused crawl."
        ),
    ] = True
    follow_nofollow: Annotated[
        bool, _doc("Follow rel=nofollow links and links of pages with a nofollow robots directive.")
    ] = False
    strip_session_ids: Annotated[
        bool, _doc("Normalization: remove session-id query parameters (jsessionid, phpsessid, sid, ...).")
    ] = False
    strip_tracking_params: Annotated[
        bool, _doc("Normalization: remove tracking query parameters (utm_*, gclid, fbclid, ...).")
    ] = False
    strip_params: Annotated[
        tuple[str, ...], _doc("Normalization: remove query parameters with these names (glob patterns, any case).")
    ] = ()
    sort_query: Annotated[bool, _doc("Normalization: sort query parameters, so that their order does not matter.")] = (
        False
    )

    # checkpoints
    checkpoint_interval: Annotated[
        float, _doc("Seconds between checkpoints; between them the journal keeps every change.", gt=0)
    ] = 30.0
    shutdown_grace: Annotated[
        float,
        _doc("Seconds in-flight fetches get to finish after Ctrl-C/SIGTERM before they are abandoned.", ge=0),
    ] = 10.0

    # output
    warc_max_bytes: Annotated[
        int, _doc("A WARC file is closed and a new one started beyond this size.", ge=1 << 16)
    ] = 1 << 30
    warc_prefix: Annotated[
        str,
        _doc("First part of WARC file names (PREFIX-TIMESTAMP-SERIAL-PID~HOST.warc.gz).", pattern=r"^[A-Za-z0-9._-]+$"),
    ] = "crawlspace"
    warc_compression_level: Annotated[
        int, _doc("gzip effort of WARC records, ISA-L levels: 0 fastest, 3 smallest (1: 5x zlib's speed).", ge=0, le=3)
    ] = 1
    store_text: Annotated[
        bool,
        _doc(
            "Keep the extracted text in the crawl table (content:text, zstd) besides the WARC pointer. Off by default:"
            " it costs a quarter of the store's CPU per page; export re-extracts text from the WARC record."
        ),
    ] = False
    table_title_versions: Annotated[int, _doc("Versions kept of a page's title cell.", ge=1, le=1000)] = 3
    table_content_versions: Annotated[
        int, _doc("Versions kept of each content cell (text, WARC pointer, outlinks).", ge=1, le=1000)
    ] = 3
    table_fetch_versions: Annotated[
        int, _doc("Versions kept of the fetch cell: the change history the refresh policy reads.", ge=1, le=1000)
    ] = 16
    table_anchor_versions: Annotated[
        int, _doc("Versions kept of each anchor cell (one per linking page).", ge=1, le=1000)
    ] = 1
    store_flush_pages: Annotated[
        int, _doc("Pages whose crawl-table cells are committed in one batch (transaction).", ge=1, le=1_000_000)
    ] = 500
    store_flush_seconds: Annotated[
        float, _doc("Longest seconds buffered crawl-table cells wait before they are committed.", gt=0)
    ] = 1.0
    store_sync: Annotated[
        bool, _doc("fsync WARC files and the table log at each commit (survives power loss, not only crashes).")
    ] = True
    progress_interval: Annotated[float, _doc("Seconds between progress reports.", gt=0)] = 2.0

    # extensions (Python API: crawlspace.Crawler)
    processor_concurrency: Annotated[
        int,
        _doc(
            "Pages whose processors may run at once (async and pooled ones are awaited meanwhile); while this "
            "many wait, no new fetch starts, so memory stays bounded however slow they are.",
            ge=1,
            le=100_000,
        ),
    ] = 16
    processor_timeout: Annotated[
        PositiveFloat | None,
        _doc("Seconds an async or pooled processor may spend on one page before it is abandoned for it."),
    ] = 300.0

    # crawl policy
    policy: Annotated[
        str,
        _doc(
            "Crawl ordering: bfs, dfs, random, backlinks, pagerank, opic, bigsite or focused. It orders "
            "the frontier's front queues only: politeness and robots.txt are the same under every policy."
        ),
    ] = "bfs"
    policy_levels: Annotated[
        int, _doc("Front (priority) queues of the policies other than bfs; level 0 is the most urgent.", ge=2, le=64)
    ] = 16
    policy_seed: Annotated[int, _doc("Seed of the random policy's choices (same seed, same levels).")] = 0
    pagerank_interval: Annotated[
        int, _doc("pagerank: recompute partial PageRank after this many fetched pages (k) at the least.", ge=1)
    ] = 100
    pagerank_growth: Annotated[
        float,
        _doc(
            "pagerank: between two computations wait also for this fraction of the pages fetched so far "
            "(max(k, growth x pages)): total work O(edges x log pages) instead of O(edges x pages / k); 0: every k.",
            ge=0,
            le=10,
        ),
    ] = 0.1
    pagerank_damping: Annotated[float, _doc("pagerank: the damping factor d.", gt=0, lt=1)] = 0.85
    focused_keywords: Annotated[
        list[str], _doc("focused: the topic as keywords (each content word weighs the same).")
    ] = []
    focused_example: Annotated[
        str | None, _doc("focused: the topic as an example document (a text or HTML file); wins over keywords.")
    ] = None
    focused_anchor_weight: Annotated[
        float,
        _doc("focused: weight of anchor text relevance in a link's score (the rest: the linking page's).", ge=0, le=1),
    ] = 0.5
    focused_threshold: Annotated[
        float, _doc("focused: relevance (cosine, 0 to 1) from which a page counts as relevant (harvest).", ge=0, le=1)
    ] = 0.1

    # continuous crawling (crawlspace.refresh)
    refresh: Annotated[
        bool,
        _doc(
            "A continuous crawl: every page fetched is scheduled again, as often as its estimated change rate "
            "and the refresh policy say (crawlspace.refresh), within max_rate; the crawl ends only by a limit "
            "or a stop. Needs max_rate."
        ),
    ] = False
    refresh_policy: Annotated[
        Literal["uniform", "proportional", "optimal", "user-experience"],
        _doc(
            "How refetches share the refresh budget: uniform (every page alike), proportional (by change rate), "
            "optimal (Cho & Garcia-Molina's freshness-optimal allocation) or user-experience (optimal, each page "
            "weighted by its impressions in the search index's top results for the queries of refresh_query_log)."
        ),
    ] = "optimal"
    refresh_query_log: Annotated[
        str | None,
        _doc(
            "The user-experience policy's query log: a text file, one query per line (a query logged n times "
            "counts n times), created empty if missing and read as it grows at every recomputation (malformed "
            "lines are skipped and counted); `crawl --serve` appends the searches made on the dashboard to it, "
            "so keep it outside the crawl directory."
        ),
    ] = None
    refresh_query_interval: Annotated[
        PositiveFloat,
        _doc("Seconds between two recomputations of the user-experience weights from the index and the query log."),
    ] = 300.0
    refresh_weights: Annotated[
        Literal["in-links", "pagerank", "none"],
        _doc(
            "Page quality for the refresh policy: in-links (log2(2 + pages linking it), counted as the crawl "
            "finds them, so that spam changing on every fetch that nobody links gets few refetches), pagerank "
            "(1 + log2(1 + the page's partial PageRank relative to the uniform share), over the links the "
            "crawl has found, recomputed every pagerank_interval pages) or none (plain freshness)."
        ),
    ] = "in-links"
    max_rate: Annotated[
        PositiveFloat | None,
        _doc("Fetches per second of the whole crawl (all processes together): its bandwidth budget (None: no cap)."),
    ] = None
    refresh_share: Annotated[
        float, _doc("Share of max_rate that refetches may take; discovery of new URLs has the rest.", gt=0, le=1)
    ] = 0.5
    refresh_min_interval: Annotated[
        PositiveFloat, _doc("Least seconds between two fetches of a page by the refresh schedule.")
    ] = 60.0
    refresh_max_interval: Annotated[
        PositiveFloat, _doc("Most seconds between two fetches of a page, however rarely it seems to change.")
    ] = 30 * 86400.0

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self), include_extras=True)
        for name in self.__struct_fields__:
            try:
                msgspec.convert(getattr(self, name), hints[name], strict=False)
            except msgspec.ValidationError as exc:
                raise ConfigError(f"{name}: {_clean(str(exc))}") from None
        if self.max_delay < self.min_delay:
            raise ConfigError(f"max_delay ({self.max_delay}) is less than min_delay ({self.min_delay})")
        _check_network(self)
        for name in ("include", "exclude"):
            for pattern in getattr(self, name):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ConfigError(f"{name}: invalid regular expression {pattern!r}: {exc}") from None
        _check_policy(self)
        if self.refresh and self.max_rate is None:
            raise ConfigError("refresh: a continuous crawl needs max_rate (the fetch budget refresh_share divides)")
        if self.refresh_policy == "user-experience" and not self.refresh_query_log:
            raise ConfigError("refresh_policy user-experience needs refresh_query_log (a file of queries, one a line)")
        if self.refresh_min_interval > self.refresh_max_interval:
            raise ConfigError(
                f"refresh_min_interval ({self.refresh_min_interval}) is more than refresh_max_interval "
                f"({self.refresh_max_interval})"
            )

    @classmethod
    def from_mapping(cls, values: dict[str, Any], *, source: str = "config") -> CrawlConfig:
        check_keys(values, cls.__struct_fields__, source=source)
        try:
            return msgspec.convert(values, cls, strict=False)
        except msgspec.ValidationError as exc:
            raise ConfigError(f"{source}: {_keyed(str(exc))}") from None

    @classmethod
    def load(cls, path: str | Path | None = None, *, base: CrawlConfig | None = None, **overrides: Any) -> CrawlConfig:
        """Read a TOML file (if given) and apply keyword overrides on top of it; keys neither sets keep
        their value in `base` (a resumed crawl's saved configuration) or their default."""
        values: dict[str, Any] = base.to_dict() if base is not None else {}
        if path is not None:
            try:
                with open(path, "rb") as handle:
                    values.update(tomllib.load(handle))
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"invalid TOML in {path}: {exc}") from None
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls.from_mapping(values, source=str(path) if path else "config")

    def replace(self, **changes: Any) -> CrawlConfig:
        check_keys(changes, self.__struct_fields__, source="CrawlConfig.replace")
        return msgspec.structs.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]

    def differences(self, other: CrawlConfig) -> dict[str, tuple[Any, Any]]:
        """Keys whose values differ, as (self's, other's): reported when a resumed crawl changes its config."""
        return {
            name: (getattr(self, name), getattr(other, name))
            for name in self.__struct_fields__
            if getattr(self, name) != getattr(other, name)
        }


def _check_network(config: CrawlConfig) -> None:
    for net in config.allow_networks:
        try:
            ipaddress.ip_network(net, strict=False)
        except ValueError:
            raise ConfigError(f"allow_networks: {net!r} is not a CIDR network") from None
    for server in config.dns_servers:
        address = server.rsplit(":", 1)[0] if server.count(":") == 1 else server.strip("[]").split("]:")[0]
        try:
            ipaddress.ip_address(address.strip("[]"))
        except ValueError:
            raise ConfigError(f"dns_servers: {server!r} is not IP or IP:port") from None
    if config.dns_min_ttl > config.dns_max_ttl:
        raise ConfigError(f"dns_min_ttl ({config.dns_min_ttl}) is more than dns_max_ttl ({config.dns_max_ttl})")


POLICY_NAMES = ("bfs", "dfs", "random", "backlinks", "pagerank", "opic", "bigsite", "focused")
REFRESH_POLICY_NAMES = ("optimal", "uniform", "proportional")  # Cho & Garcia-Molina's, which evaluate-refresh compares
CRAWL_REFRESH_POLICY_NAMES = (*REFRESH_POLICY_NAMES, "user-experience")  # the last needs refresh_query_log


def _check_policy(config: CrawlConfig) -> None:
    if config.policy not in POLICY_NAMES:
        close = difflib.get_close_matches(config.policy, POLICY_NAMES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"policy: unknown policy {config.policy!r} (one of {', '.join(POLICY_NAMES)}){hint}")
    if config.policy == "focused" and not config.focused_example and not config.focused_keywords:
        raise ConfigError("policy 'focused' needs a topic: focused_keywords or focused_example")


def _clean(message: str) -> str:
    return message.replace(" - at `$`", "").replace("`$.", "`")


_AT_KEY = re.compile(r"^(?P<message>.*) - at `\$\.(?P<key>[^`]+)`$", re.DOTALL)


def _keyed(message: str) -> str:
    """msgspec's "Expected ... - at `$.key`" as "key: Expected ...", the form keyword construction reports."""
    match = _AT_KEY.match(message)
    return f"{match['key']}: {match['message']}" if match else _clean(message)


def reference_markdown() -> str:
    """The configuration reference, generated from CrawlConfig so that it cannot drift from the code."""
    info = msgspec.inspect.type_info(CrawlConfig)
    assert isinstance(info, msgspec.inspect.StructType)
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for field_info in info.fields:
        kind = field_info.type
        description = ""
        if isinstance(kind, msgspec.inspect.Metadata):
            description = (kind.extra_json_schema or {}).get("description", "")
            kind = kind.type
        default = field_info.default
        if default is msgspec.NODEFAULT and field_info.default_factory is not msgspec.NODEFAULT:
            default = field_info.default_factory()
        shown = "none" if default is None else _json(default)
        rows.append(f"| `{field_info.name}` | {_type_name(kind)} | `{shown}` | {description} |")
    return "\n".join(rows) + "\n"


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _type_name(kind: msgspec.inspect.Type) -> str:
    if isinstance(kind, msgspec.inspect.Metadata):
        return _type_name(kind.type)
    if isinstance(kind, msgspec.inspect.UnionType):
        return " or ".join(_type_name(member) for member in kind.types)
    if isinstance(kind, msgspec.inspect.VarTupleType | msgspec.inspect.ListType):
        return f"list of {_type_name(kind.item_type)}"
    if isinstance(kind, msgspec.inspect.LiteralType):
        return "one of " + ", ".join(_json(value) for value in kind.values)
    names = {
        msgspec.inspect.IntType: "integer",
        msgspec.inspect.FloatType: "number",
        msgspec.inspect.StrType: "string",
        msgspec.inspect.BoolType: "boolean",
        msgspec.inspect.NoneType: "none",
        msgspec.inspect.DictType: "table",
        msgspec.inspect.ListType: "list",
    }
    bounds = []
    for attr, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        value = getattr(kind, attr, None)
        if value is not None:
            bounds.append(f"{symbol} {value}")
    return names.get(type(kind), type(kind).__name__) + (f" ({', '.join(bounds)})" if bounds else "")
