"""`SimWeb`: a generated web and its ground truth, answered by URL.

`SimWeb.generate(config)` draws the arrays (build.py) and keeps the corpus for rendering; the
instance answers the questions tests ask about a crawl (which URLs exist, robots verdicts,
duplicates, links, what a correct crawler fetches, PageRank) and the server's question, "what
is the response to this host and path" (`response`). URLs given to the ground-truth methods
are in normalized form (lower-case host, no default port, no fragment, unreserved characters
unescaped); `split_url` is the minimal parser that reads them (fragments and case are forgiven).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable

from crawlspace.simweb.build import generate_data
from crawlspace.simweb.changes import ChangeModel, Version
from crawlspace.simweb.config import SimWebConfig
from crawlspace.simweb.model import ExtraKind, Link, Response, WebData
from crawlspace.simweb.render import HTML, RenderedLink, Renderer
from crawlspace.simweb.robots import CRAWLABLE_ROOT, RobotsKind, path_allowed, robots_status
from crawlspace.simweb.robots import crawl_delay as robots_crawl_delay
from crawlspace.simweb.text import Corpus
from crawlspace.simweb.truth import expected_fetch_nodes, pagerank

__all__ = ["SimWeb", "SimWebConfig", "split_url", "unescape_unreserved"]

_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def unescape_unreserved(path: str) -> str:
    """Decode %XX escapes of unreserved characters (RFC 3986 §6.2.2.2); other escapes are kept."""
    if "%" not in path:
        return path
    return _ESCAPE.sub(
        lambda m: chr(int(m.group(1), 16)) if chr(int(m.group(1), 16)) in _UNRESERVED else "%" + m.group(1).upper(),
        path,
    )


def split_url(url: str) -> tuple[str, int, str]:
    """(lower-case host, port, path with unreserved escapes decoded, fragment dropped) of an http URL."""
    if not url.lower().startswith("http://"):
        raise ValueError(f"not an http URL: {url!r}")
    rest = url[7:].split("#", 1)[0]
    slash = rest.find("/")
    authority, path = (rest, "/") if slash < 0 else (rest[:slash], rest[slash:])
    host, _, port = authority.rpartition("@")[2].partition(":")
    return host.lower().rstrip("."), int(port) if port else 80, unescape_unreserved(path)


class SimWeb:
    """A simulated web: its arrays, its renderer and the ground truth of a crawl over it."""

    def __init__(self, data: WebData, corpus: Corpus) -> None:
        self.data = data
        self.config = data.config
        self.renderer = Renderer(data, corpus)
        self._host_index = {name: index for index, name in enumerate(data.host_names)}
        self._routes: dict[int, dict[str, int]] = {}
        self._extras_by_host: dict[int, list[int]] | None = None
        self.changes = (
            ChangeModel(self.config.seed, data.pages, epoch=self.config.change_epoch, time_scale=self.config.time_scale)
            if self.config.changing
            else None
        )

    @classmethod
    def generate(cls, config: SimWebConfig) -> SimWeb:
        return cls(generate_data(config), Corpus.build())

    def __repr__(self) -> str:
        return (
            f"SimWeb(hosts={len(self.data.host_names)}, pages={self.data.pages}, nodes={self.data.nodes}, "
            f"seed={self.config.seed}, port={self.config.port})"
        )

    # -- hosts ---------------------------------------------------------------------------------
    @property
    def hosts(self) -> tuple[str, ...]:
        """Host names, most popular first."""
        return self.data.host_names

    def host_index(self, host: str) -> int:
        """Index of a host name (case-insensitive); KeyError for a host not in this web."""
        return self._host_index[host.lower()]

    def has_host(self, host: str) -> bool:
        return host.lower() in self._host_index

    def origin(self, host: str) -> str:
        return self.data.origin(self.host_index(host))

    def ip_suffix(self, host: str) -> tuple[int, int]:
        """The last two octets (x, y) of the host's address 127.R.x.y; shared-IP hosts share them."""
        index = int(self.data.host_ip_index[self.host_index(host)]) + 1
        return index // 254, index % 254 + 1

    def host_ip(self, host: str, octet: int) -> str:
        """The loopback address of a host for a server that uses second octet `octet`."""
        x, y = self.ip_suffix(host)
        return f"127.{octet}.{x}.{y}"

    def hosts_file_text(self, octet: int) -> str:
        """`127.R.x.y name` lines, for the crawler's --hosts-file."""
        return "".join(f"{self.host_ip(name, octet)} {name}\n" for name in self.hosts)

    def latency(self, host: str) -> float:
        return float(self.data.host_latency[self.host_index(host)])

    def bandwidth(self, host: str) -> float:
        """Bytes per second for responses of this host; 0 means unlimited."""
        return float(self.data.host_bandwidth[self.host_index(host)])

    @property
    def trap_host(self) -> str | None:
        return self.data.host_names[self.data.trap_host] if self.data.trap_host >= 0 else None

    # -- URLs and nodes ------------------------------------------------------------------------
    def routes(self, host: int) -> dict[str, int]:
        """path -> node of one host, built on first use (a 10,000-host web need not build them all)."""
        table = self._routes.get(host)
        if table is None:
            data = self.data
            start, end = int(data.host_start[host]), int(data.host_start[host + 1])
            table = {data.path_of(node): node for node in range(start, end)}
            table.update(self._extra_paths(host))
            self._routes[host] = table
        return table

    def _extra_paths(self, host: int) -> dict[str, int]:
        if self._extras_by_host is None:
            by_host: dict[int, list[int]] = {}
            for extra, owner in enumerate(self.data.extra_host.tolist()):
                by_host.setdefault(owner, []).append(extra)
            self._extras_by_host = by_host
        pages = self.data.pages
        return {self.data.extra_path[extra]: pages + extra for extra in self._extras_by_host.get(host, [])}

    def node_of(self, url: str) -> int | None:
        """Node id of a URL of this web, or None (unknown path, trap URL, robots.txt)."""
        host, port, path = split_url(url)
        index = self._host_index.get(host)
        if index is None or port != self.config.port:
            return None
        return self.routes(index).get(path)

    def url_of(self, node: int) -> str:
        return self.data.url_of(node)

    def _node(self, url: str) -> int:
        node = self.node_of(url)
        if node is None:
            raise KeyError(f"not a URL of this web: {url}")
        return node

    # -- serving -------------------------------------------------------------------------------
    def response(self, host: int, path: str, at: float | None = None) -> Response:
        """The response to GET `path` (unreserved escapes already decoded) on host number `host`; on a
        changing web, as the page is at Unix time `at` (default: now)."""
        if path == "/robots.txt":
            return self.renderer.robots_response(host)
        node = self.routes(host).get(path)
        if node is not None:
            if self.changes is not None:
                return self._changing_response(node, time.time() if at is None else at)
            return self.renderer.node_response(node)
        if self.changes is not None and path.startswith("/news/"):
            news = self._news_response(host, path, time.time() if at is None else at)
            if news is not None:
                return news
        if host == self.data.trap_host:
            month = self.renderer.calendar_month(path)
            if month is not None:
                return Response(200, HTML, self.renderer.calendar_body(host, *month))
        return Response(404, HTML, self.renderer.error_body(404, path))

    def body(self, url: str, at: float | None = None) -> bytes:
        """The body served at a URL (what a crawler downloads; on a changing web, at Unix time `at`)."""
        host, _, path = split_url(url)
        return self.response(self.host_index(host), path, at).body

    # -- a changing web (simweb.changes) -------------------------------------------------------
    def page_of(self, node: int) -> int | None:
        """The page whose content a node serves (itself, or the original of a copy), None for others."""
        data = self.data
        if node < data.pages:
            return node
        extra = node - data.pages
        if int(data.extra_kind[extra]) in (ExtraKind.COPY, ExtraKind.NEAR):
            return int(data.extra_target[extra])
        return None

    def version_at(self, url: str, at: float) -> Version | None:
        """The version a URL serves at Unix time `at`; None for a URL whose content never changes."""
        node = self.node_of(url)
        page = None if node is None or self.changes is None else self.page_of(node)
        if page is None or self.changes is None:
            return None
        assert node is not None
        return self.changes.version(page, self._served_as_of(node, at))

    def _served_as_of(self, node: int, at: float) -> float:
        """The instant whose version a node serves at `at`: a lagging mirror's is earlier (config.mirror_lag)."""
        lag, pages = self.config.mirror_lag, self.data.pages
        if lag and node >= pages and int(self.data.extra_kind[node - pages]) == ExtraKind.COPY:
            return at - lag / self.config.time_scale
        return at

    def news_url(self, page: int, version: int) -> str:
        return f"{self.data.origin(int(self.data.page_host[page]))}/news/{page}-{version}.html"

    def _changing_response(self, node: int, at: float) -> Response:
        changes = self.changes
        page = self.page_of(node)
        if changes is None or page is None:
            return self.renderer.node_response(node)
        version = changes.version(page, self._served_as_of(node, at))
        news = self.news_url(page, version.number) if changes.news_version(version.number, page) else None
        near = int(self.data.extra_aux[node - self.data.pages]) if node >= self.data.pages else 0
        body = self.renderer.page_body(page, near, version.number, news)
        spam = changes.kind_and_rate(page)[1] == float("inf")
        return Response(
            200, HTML, body, etag=f'"{node:x}-{version.number:x}"', last_modified=None if spam else version.changed_at
        )

    def _news_response(self, host: int, path: str, at: float) -> Response | None:
        """A news item exists from the version that links to it on."""
        changes = self.changes
        name, dot, suffix = path[len("/news/") :].partition(".")
        page_text, dash, version_text = name.partition("-")
        if changes is None or not (
            dot and suffix == "html" and dash and page_text.isdigit() and version_text.isdigit()
        ):
            return None
        page, version = int(page_text), int(version_text)
        if page >= self.data.pages or int(self.data.page_host[page]) != host or not changes.news_version(version, page):
            return None
        if changes.version(page, at).number < version:
            return None
        return Response(
            200, HTML, self.renderer.news_body(page, version, self.data.url_of(page)), etag=f'"n{page:x}-{version:x}"'
        )

    # -- ground truth --------------------------------------------------------------------------
    def seeds(self, n: int) -> list[str]:
        """Roots of the n most popular hosts that crawlspace may crawl (not the trap host)."""
        chosen: list[str] = []
        for index, kind in enumerate(self.data.host_robots.tolist()):
            if len(chosen) >= n:
                break
            if RobotsKind(kind) in CRAWLABLE_ROOT and index != self.data.trap_host:
                chosen.append(self.data.origin(index) + "/")
        return chosen

    def all_urls(self) -> dict[str, int]:
        """Every URL the server answers for, with its status (robots.txt and the trap's calendar excluded)."""
        data = self.data
        return {data.url_of(node): data.status_of(node) for node in range(data.nodes)}

    def status(self, url: str) -> int:
        """HTTP status of a URL (404 for unknown ones; trap URLs answer 200)."""
        node = self.node_of(url)
        if node is not None:
            return self.data.status_of(node)
        return 200 if self.is_trap(url) else 404

    def robots_kind(self, host: str) -> RobotsKind:
        return RobotsKind(int(self.data.host_robots[self.host_index(host)]))

    def robots_txt(self, host: str) -> tuple[int, str]:
        """(status, body) of the host's /robots.txt."""
        response = self.renderer.robots_response(self.host_index(host))
        return response.status, response.body.decode()

    def robots_allowed(self, url: str, agent: str = "crawlspace") -> bool:
        """May `agent` fetch this URL? 404 robots.txt: yes; 5xx robots.txt: nothing on the host."""
        host, _, path = split_url(url)
        return path_allowed(self.robots_kind(host), path, agent)

    def crawl_delay(self, host: str, agent: str = "crawlspace") -> float | None:
        """Crawl-delay of the host's robots.txt for `agent`, None when it has none."""
        return robots_crawl_delay(self.robots_kind(host), self.config.robots_crawl_delay, agent)

    def robots_status(self, host: str) -> int:
        return robots_status(self.robots_kind(host))

    def duplicate_cluster(self, url: str) -> int | None:
        """Exact-duplicate cluster of a URL (an original and its copies share one), None if unique."""
        node = self.node_of(url)
        cluster = int(self.data.cluster[node]) if node is not None else -1
        return cluster if cluster >= 0 else None

    def duplicate_clusters(self) -> dict[int, list[str]]:
        """Every exact-duplicate cluster with its URLs, original first."""
        clusters: dict[int, list[str]] = {}
        for node in (self.data.cluster >= 0).nonzero()[0].tolist():
            clusters.setdefault(int(self.data.cluster[node]), []).append(self.data.url_of(node))
        return clusters

    def near_duplicate_of(self, url: str) -> str | None:
        """The original of a near-copy (a copy with 1 to 5 words changed), None for other URLs."""
        node = self.node_of(url)
        original = int(self.data.near_of[node]) if node is not None else -1
        return self.data.url_of(original) if original >= 0 else None

    def redirect_target(self, url: str) -> str | None:
        """Normalized target of a redirect URL, None for other URLs."""
        node = self.node_of(url)
        pages = self.data.pages
        if node is None or node < pages or self.data.extra_kind[node - pages] != ExtraKind.REDIRECT:
            return None
        return self.data.url_of(int(self.data.extra_target[node - pages]))

    def is_trap(self, url: str) -> bool:
        """Is the URL in the spider trap's infinite calendar space?"""
        host, port, path = split_url(url)
        index = self._host_index.get(host)
        return (
            index is not None
            and index == self.data.trap_host
            and port == self.config.port
            and self.renderer.calendar_month(path) is not None
        )

    def _links(self, rendered: list[RenderedLink]) -> list[Link]:
        return [Link(link.target_url, link.anchor, link.nofollow, link.href) for link in rendered]

    def links(self, url: str) -> list[Link]:
        """Links of the body served at `url`, in body order (empty for redirects, errors and leaves)."""
        host, _, path = split_url(url)
        if self.is_trap(url):
            month = self.renderer.calendar_month(path)
            assert month is not None
            return self._links(self.renderer.calendar_links(self.host_index(host), *month))
        node = self._node(url)
        data = self.data
        if node >= data.pages:
            extra = node - data.pages
            if data.extra_kind[extra] not in (ExtraKind.COPY, ExtraKind.NEAR):
                return []
            node = int(data.extra_target[extra])
        return self._links(self.renderer.page_links(node))

    def base_href(self, url: str) -> str | None:
        """The `<base href>` of the page served at `url`, if it has one."""
        node = self._node(url)
        if node >= self.data.pages or self.data.page_base[node] < 0:
            return None
        return self.data.origin(int(self.data.page_host[node])) + self.renderer.base_dir(node)

    def expected_fetches(
        self,
        seeds: Iterable[str],
        agent: str = "crawlspace",
        follow_nofollow: bool = False,
        max_redirects: int = 10,
        follow_duplicate_links: bool = True,
    ) -> set[str]:
        """URLs a correct crawler requests, each exactly once, starting from `seeds`.

        BFS over followed links (not nofollow unless asked) and redirects (a redirect URL is
        fetched, then its target, up to `max_redirects` hops); URLs robots.txt disallows are
        not fetched and their links are not seen; 404 and 5xx URLs are fetched and have no
        links. The trap's calendar space is left out (see `is_trap`), and so are robots.txt
        requests. Seeds that are not URLs of this web are ignored.
        """
        nodes = [node for node in (self.node_of(seed) for seed in seeds) if node is not None]
        fetched = expected_fetch_nodes(
            self.data,
            nodes,
            agent=agent,
            follow_nofollow=follow_nofollow,
            max_redirects=max_redirects,
            follow_duplicate_links=follow_duplicate_links,
        )
        return {self.data.url_of(node) for node in fetched}

    def pagerank(self, damping: float = 0.85) -> dict[str, float]:
        """PageRank of every URL of `all_urls` (sums to 1), over followed links and redirects."""
        ranks = pagerank(self.data, damping)
        return {self.data.url_of(node): float(rank) for node, rank in enumerate(ranks.tolist())}

    def fingerprint(self) -> str:
        """Digest of the generated arrays: equal webs, equal fingerprints (checks a regenerated copy)."""
        digest = hashlib.blake2b(digest_size=16)
        data = self.data
        digest.update(repr(self.config).encode())
        digest.update("\n".join(data.host_names).encode())
        digest.update("\n".join(data.extra_path).encode())
        for array in (
            data.host_start,
            data.host_robots,
            data.host_ip_index,
            data.page_dir,
            data.page_base,
            data.page_bytes,
            data.link_start,
            data.link_dst,
            data.link_form,
            data.link_nofollow,
            data.extra_host,
            data.extra_kind,
            data.extra_target,
            data.extra_status,
            data.extra_aux,
        ):
            digest.update(array.tobytes())
        return digest.hexdigest()
