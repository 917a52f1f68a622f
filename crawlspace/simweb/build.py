"""Generation of the arrays of a web (model.WebData) from a config, vectorized with numpy.

Shape, in the order it is drawn:
1. Hosts: a lognormal number of pages each (heavy tail, capped); popularity falls with the host
   index (host 0 is the most popular), names `siteNNNN.test`, some with `www.`.
2. Pages: page 0 of a host is `/`; every other page gets a parent among the earlier pages of
   its host, which links to it, so the whole host is reachable from its root; a directory
   (/, /sK/, /sK/dM/, /~user/) so that relative and `../` links have something to climb.
3. Random links: mostly intra-host, log-uniform towards the first (shallow) pages; cross-host
   links pick hosts by popularity (Zipf), so in-degree is heavy-tailed; every host but the
   first also gets two links to its root from earlier hosts, so most of the web hangs together.
4. Extras: exact copies, near-copies, redirects (single, 3-hop chains, one loop), 5xx, 404s
   and nofollow-only pages, each linked from a page of its own host.
5. robots.txt kinds per host, the trap host, shared IPs, latency and bandwidth.
"""

from __future__ import annotations

import numpy as np

from crawlspace.simweb.config import SimWebConfig
from crawlspace.simweb.model import (
    DIRS,
    FORM_WEIGHTS,
    JAVASCRIPT,
    MAILTO,
    TILDE_DIR,
    TRAP_ENTRY,
    ExtraKind,
    Int8Array,
    Int64Array,
    WebData,
)
from crawlspace.simweb.robots import CRAWLABLE_ROOT, KIND_WEIGHTS, RobotsKind

PAGES_SIGMA = 1.3
PAGE_BYTES_SIGMA = 0.6
HOST_POPULARITY_EXPONENT = 1.0
HOST_INLINKS = 2
WWW_FRACTION = 0.3
TILDE_HOST_FRACTION = 0.3
BASE_HREF_FRACTION = 0.05
MAILTO_FRACTION = 0.08
JAVASCRIPT_FRACTION = 0.05
REDIRECT_STATUSES = (301, 302, 307, 308)


def _log_uniform(rng: np.random.Generator, sizes: Int64Array) -> Int64Array:
    """A local page index in 0..size-1 with P(i) roughly proportional to 1/(i+1): shallow pages win."""
    exponent = rng.random(sizes.shape[0])
    local: Int64Array = np.floor(np.power(sizes + 1.0, exponent)).astype(np.int64) - 1
    return np.minimum(local, sizes - 1).astype(np.int64)


def _uniform(rng: np.random.Generator, sizes: Int64Array) -> Int64Array:
    local: Int64Array = np.floor(rng.random(sizes.shape[0]) * sizes).astype(np.int64)
    return np.minimum(local, sizes - 1).astype(np.int64)


class _Extras:
    """Accumulates extra nodes and the links that make them reachable, then hands out arrays."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.host: list[int] = []
        self.kind: list[int] = []
        self.target: list[int] = []
        self.status: list[int] = []
        self.aux: list[int] = []
        self.path: list[str] = []
        self.linker_src: list[int] = []
        self.linker_dst: list[int] = []
        self.linker_nofollow: list[bool] = []

    def add(self, host: int, kind: ExtraKind, target: int, status: int, aux: int, path: str) -> int:
        self.host.append(host)
        self.kind.append(int(kind))
        self.target.append(target)
        self.status.append(status)
        self.aux.append(aux)
        self.path.append(path)
        return self.pages + len(self.host) - 1

    def link_from(self, source_page: int, node: int, nofollow: bool = False) -> None:
        self.linker_src.append(source_page)
        self.linker_dst.append(node)
        self.linker_nofollow.append(nofollow)


def _pages_per_host(rng: np.random.Generator, config: SimWebConfig) -> Int64Array:
    raw = rng.lognormal(0.0, PAGES_SIGMA, config.hosts)
    raw *= config.mean_pages_per_host / raw.mean()
    return np.clip(np.rint(raw), 1, config.max_pages_per_host).astype(np.int64)


def _robots_kinds(rng: np.random.Generator, hosts: int, trap_host: int) -> Int8Array:
    kinds = list(KIND_WEIGHTS)
    weights = np.array([KIND_WEIGHTS[kind] for kind in kinds])
    drawn = rng.choice(np.array([int(kind) for kind in kinds]), size=hosts, p=weights / weights.sum())
    others = np.arange(1, hosts)
    if trap_host >= 0:
        others = others[others != trap_host]
    if others.shape[0] >= len(kinds):
        # Every kind appears at least once, on hosts spread over the popularity range.
        chosen = rng.choice(others, size=len(kinds), replace=False)
        drawn[chosen] = [int(kind) for kind in kinds]
    if int(drawn[0]) not in {int(kind) for kind in CRAWLABLE_ROOT}:
        drawn[0] = int(RobotsKind.NONE)
    if trap_host >= 0:
        drawn[trap_host] = int(RobotsKind.NONE)
    return drawn.astype(np.int8)


def generate_data(config: SimWebConfig) -> WebData:
    """Draw a web. Same config, same arrays, on any machine with the same numpy.

    PCG64's bit stream is fixed, but numpy keeps the right to change how a distribution is drawn
    from it between versions; `SimWeb.fingerprint` is how a copy generated elsewhere is checked.
    """
    rng = np.random.default_rng(config.seed)
    n_hosts = config.hosts

    # 1. hosts
    sizes = _pages_per_host(rng, config)
    host_start = np.zeros(n_hosts + 1, dtype=np.int64)
    np.cumsum(sizes, out=host_start[1:])
    pages = int(host_start[-1])
    width = max(4, len(str(n_hosts - 1)))
    www = rng.random(n_hosts) < WWW_FRACTION
    host_names = tuple(f"{'www.' if www[h] else ''}site{h:0{width}d}.test" for h in range(n_hosts))
    popularity = np.arange(1, n_hosts + 1, dtype=np.float64) ** -HOST_POPULARITY_EXPONENT
    popularity /= popularity.sum()
    tilde_host = rng.random(n_hosts) < TILDE_HOST_FRACTION

    # 2. pages: parent tree and directories
    page_host = np.repeat(np.arange(n_hosts, dtype=np.int32), sizes)
    first_page = host_start[:-1][page_host]
    local = np.arange(pages, dtype=np.int64) - first_page
    parent = first_page + np.floor(rng.random(pages) * local).astype(np.int64)
    level = rng.choice(3, size=pages, p=(0.25, 0.35, 0.40))
    level1 = rng.integers(1, 5, size=pages)
    level1[(rng.random(pages) < 0.2) & tilde_host[page_host]] = TILDE_DIR
    level2 = rng.integers(1, 4, size=pages)
    page_dir = np.where(level == 0, 0, level1 * 4 + np.where(level == 2, level2, 0))
    page_dir[local == 0] = 0
    median_bytes = config.mean_page_bytes * np.exp(-(PAGE_BYTES_SIGMA**2) / 2)
    page_bytes = np.clip(
        rng.lognormal(np.log(median_bytes), PAGE_BYTES_SIGMA, pages), config.page_bytes[0], config.page_bytes[1]
    ).astype(np.int32)

    # 3. links: tree, random, host in-links, mailto/javascript
    non_root = np.flatnonzero(local > 0)
    sources = [parent[non_root]]
    targets = [non_root.astype(np.int64)]
    nofollow = [np.zeros(non_root.shape[0], dtype=bool)]
    counts = rng.poisson(max(config.mean_out_links - 1.0, 0.0), size=pages)
    random_src = np.repeat(np.arange(pages, dtype=np.int64), counts)
    n_random = random_src.shape[0]
    src_host = page_host[random_src].astype(np.int64)
    intra = rng.random(n_random) < config.intra_host_link_fraction
    intra_dst = host_start[src_host] + _log_uniform(rng, sizes[src_host])
    cross_host = rng.choice(n_hosts, size=n_random, p=popularity)
    cross_dst = host_start[cross_host] + _log_uniform(rng, sizes[cross_host])
    sources.append(random_src)
    targets.append(np.where(intra, intra_dst, cross_dst))
    nofollow.append(rng.random(n_random) < config.nofollow_fraction)
    if n_hosts > 1:
        to_host = np.repeat(np.arange(1, n_hosts, dtype=np.int64), HOST_INLINKS)
        from_host = np.floor(rng.random(to_host.shape[0]) * to_host).astype(np.int64)
        sources.append(host_start[from_host] + _log_uniform(rng, sizes[from_host]))
        targets.append(host_start[to_host])
        nofollow.append(np.zeros(to_host.shape[0], dtype=bool))
    for code, fraction in ((MAILTO, MAILTO_FRACTION), (JAVASCRIPT, JAVASCRIPT_FRACTION)):
        having = np.flatnonzero(rng.random(pages) < fraction)
        sources.append(having)
        targets.append(np.full(having.shape[0], code, dtype=np.int64))
        nofollow.append(np.zeros(having.shape[0], dtype=bool))
    trap_host = min(4, n_hosts - 1) if config.include_trap and n_hosts > 1 else -1
    if trap_host >= 0:
        sources.append(np.array([host_start[trap_host]], dtype=np.int64))
        targets.append(np.array([TRAP_ENTRY], dtype=np.int64))
        nofollow.append(np.zeros(1, dtype=bool))

    # 4. extras
    extras = _Extras(pages)
    cluster_pairs: list[tuple[int, int]] = []
    near_pairs: list[tuple[int, int]] = []

    def random_pages(count: int) -> Int64Array:
        return rng.integers(0, pages, size=count).astype(np.int64)

    def page_on(hosts: Int64Array) -> Int64Array:
        return host_start[hosts] + _uniform(rng, sizes[hosts])

    def host_for_copy(original_host: Int64Array) -> Int64Array:
        elsewhere = rng.choice(n_hosts, size=original_host.shape[0], p=popularity)
        return np.where(rng.random(original_host.shape[0]) < 0.5, original_host, elsewhere)

    order = rng.permutation(pages)
    n_dup = round(config.duplicate_fraction * pages)
    n_near = round(config.near_duplicate_fraction * pages)
    dup_originals = order[:n_dup]
    near_originals = order[n_dup : n_dup + n_near]
    copies_per = rng.integers(1, 4, size=n_dup)
    copy_original = np.repeat(dup_originals, copies_per)
    copy_host = host_for_copy(page_host[copy_original].astype(np.int64))
    copy_linker = page_on(copy_host)
    cluster_of_original = {int(page): index for index, page in enumerate(dup_originals.tolist())}
    for original in dup_originals.tolist():
        cluster_pairs.append((original, cluster_of_original[original]))
    for original, host, linker in zip(copy_original.tolist(), copy_host.tolist(), copy_linker.tolist(), strict=True):
        node = extras.add(host, ExtraKind.COPY, original, 200, 0, f"/mirror/m{len(extras.host)}.html")
        extras.link_from(linker, node)
        cluster_pairs.append((node, cluster_of_original[original]))
    near_host = host_for_copy(page_host[near_originals].astype(np.int64))
    near_linker = page_on(near_host)
    for original, host, linker in zip(near_originals.tolist(), near_host.tolist(), near_linker.tolist(), strict=True):
        k = len(extras.host)
        node = extras.add(host, ExtraKind.NEAR, original, 200, 1 + k % 5, f"/archive/a{k}.html")
        extras.link_from(linker, node)
        near_pairs.append((node, original))

    n_redirect = round(config.redirect_fraction * pages)
    linkers = random_pages(n_redirect)
    redirect_host = page_host[linkers].astype(np.int64)
    same = rng.random(n_redirect) < 0.8
    other_host = rng.choice(n_hosts, size=n_redirect, p=popularity)
    target_host = np.where(same, redirect_host, other_host)
    redirect_target = host_start[target_host] + _log_uniform(rng, sizes[target_host])
    for i, (linker, host, target, stay) in enumerate(
        zip(linkers.tolist(), redirect_host.tolist(), redirect_target.tolist(), same.tolist(), strict=True)
    ):
        k = len(extras.host)
        relative = int(stay and i % 3 == 0)
        status = REDIRECT_STATUSES[i % 4]
        extras.link_from(linker, extras.add(host, ExtraKind.REDIRECT, target, status, relative, f"/go/r{k}"))
    if config.redirect_fraction > 0 and pages >= 2:
        n_chains = max(1, round(config.redirect_fraction * pages / 10))
        chain_linkers = random_pages(n_chains)
        for j, linker in enumerate(chain_linkers.tolist()):
            host = int(page_host[linker])
            final = int(host_start[host] + _log_uniform(rng, sizes[host : host + 1])[0])
            first = extras.pages + len(extras.host)
            for hop in range(3):
                target = first + hop + 1 if hop < 2 else final
                status = REDIRECT_STATUSES[(j + hop) % 4]
                extras.add(host, ExtraKind.REDIRECT, target, status, hop % 2, f"/go/c{j}/{hop + 1}")
            extras.link_from(linker, first)
        loop_linker = int(random_pages(1)[0])
        loop_host = int(page_host[loop_linker])
        loop_a = extras.pages + len(extras.host)
        extras.add(loop_host, ExtraKind.REDIRECT, loop_a + 1, 302, 0, "/loop/a")
        extras.add(loop_host, ExtraKind.REDIRECT, loop_a, 302, 1, "/loop/b")
        extras.link_from(loop_linker, loop_a)

    for fraction, kind in ((config.error_fraction, ExtraKind.ERROR), (config.broken_link_fraction, ExtraKind.MISSING)):
        count = max(round(fraction * pages), 1 if fraction > 0 else 0)
        for i, linker in enumerate(random_pages(count).tolist()):
            host = int(page_host[linker])
            k = len(extras.host)
            if kind is ExtraKind.ERROR:
                node = extras.add(host, kind, -1, 500 if i % 2 == 0 else 503, 0, f"/err/e{k}.html")
            else:
                node = extras.add(host, kind, -1, 404, 0, f"{DIRS[int(page_dir[linker])]}gone{k}.html")
            extras.link_from(linker, node)
    n_hidden = max(1, round(config.nofollow_fraction * pages / 6)) if config.nofollow_fraction > 0 else 0
    for linker in random_pages(n_hidden).tolist():
        host = int(page_host[linker])
        node = extras.add(host, ExtraKind.HIDDEN, -1, 200, 0, f"/private/h{len(extras.host)}.html")
        extras.link_from(linker, node, nofollow=True)

    sources.append(np.array(extras.linker_src, dtype=np.int64))
    targets.append(np.array(extras.linker_dst, dtype=np.int64))
    nofollow.append(np.array(extras.linker_nofollow, dtype=bool))

    # CSR of all links, shuffled within each page
    all_src = np.concatenate(sources)
    all_dst = np.concatenate(targets)
    all_nofollow = np.concatenate(nofollow)
    n_links = int(all_src.shape[0])
    forms = rng.choice(len(FORM_WEIGHTS), size=n_links, p=np.array(FORM_WEIGHTS) / sum(FORM_WEIGHTS))
    by_source = np.lexsort((rng.random(n_links), all_src))
    link_start = np.zeros(pages + 1, dtype=np.int64)
    np.cumsum(np.bincount(all_src, minlength=pages), out=link_start[1:])

    # per-page flags
    n_nodes = pages + len(extras.host)
    page_abs_only = np.zeros(pages, dtype=bool)
    page_abs_only[dup_originals] = True
    page_abs_only[near_originals] = True
    page_base = np.where(
        (rng.random(pages) < BASE_HREF_FRACTION) & (local > 0) & ~page_abs_only,
        rng.choice(np.array([0, 4, 5, 8, 9, 13, 14, 16]), size=pages),
        -1,
    ).astype(np.int8)
    cluster = np.full(n_nodes, -1, dtype=np.int32)
    for node, cluster_id in cluster_pairs:
        cluster[node] = cluster_id
    near_of = np.full(n_nodes, -1, dtype=np.int32)
    for node, original in near_pairs:
        near_of[node] = original

    # 5. hosts' robots, addresses, latency, bandwidth
    host_robots = _robots_kinds(rng, n_hosts, trap_host)
    host_ip_index = np.arange(n_hosts, dtype=np.int32)
    if config.shared_ip_hosts >= 2 and n_hosts > 2:
        sharing = rng.choice(np.arange(1, n_hosts), size=min(config.shared_ip_hosts, n_hosts - 1), replace=False)
        host_ip_index[sharing] = int(sharing.min())
    factor = rng.uniform(0.5, 1.5, size=n_hosts)
    return WebData(
        config=config,
        host_names=host_names,
        host_start=host_start,
        host_robots=host_robots,
        host_ip_index=host_ip_index,
        host_latency=config.latency * factor,
        host_bandwidth=config.bandwidth * factor,
        trap_host=trap_host,
        page_host=page_host,
        page_dir=page_dir.astype(np.int8),
        page_base=page_base,
        page_bytes=page_bytes,
        page_abs_only=page_abs_only,
        link_start=link_start,
        link_dst=all_dst[by_source].astype(np.int32),
        link_form=forms[by_source].astype(np.uint8),
        link_nofollow=all_nofollow[by_source],
        extra_host=np.array(extras.host, dtype=np.int32),
        extra_kind=np.array(extras.kind, dtype=np.uint8),
        extra_target=np.array(extras.target, dtype=np.int32),
        extra_status=np.array(extras.status, dtype=np.int16),
        extra_aux=np.array(extras.aux, dtype=np.int32),
        extra_path=tuple(extras.path),
        cluster=cluster,
        near_of=near_of,
    )
