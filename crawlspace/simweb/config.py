"""The knobs of a simulated web, validated once so that a bad value fails at construction.

A `SimWebConfig` plus the generator's code fully determines a web: the server subprocess
regenerates the very same web from the JSON form of the config (`to_dict` / `from_dict`),
which is why every field is a plain JSON-compatible value.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

PAGE_STYLES = ("plain", "realistic")
MAX_HOSTS = 64_000
"""Hosts are numbered into the last two octets of 127.R.x.y (x.y never .0 or .255 in y)."""


class SimWebConfigError(ValueError):
    """A configuration value out of its range, named in the message."""


@dataclass(frozen=True, kw_only=True)
class SimWebConfig:
    """Everything that shapes a simulated web. Same config and same code give the same web, byte for byte."""

    hosts: int = 100
    """Number of web hosts (sites), each with its own loopback address."""
    seed: int = 0
    """Seed of every random choice: change it for a different web of the same shape."""
    mean_pages_per_host: float = 20.0
    """Mean of the heavy-tailed (lognormal) number of pages per host."""
    max_pages_per_host: int = 2_000
    """Cap of the pages on one host (the tail of the distribution is cut here)."""
    mean_out_links: float = 10.0
    """Mean number of hyperlinks to other pages per page (navigation to children included)."""
    intra_host_link_fraction: float = 0.8
    """Share of random links that stay on their host; the rest go mostly to popular hosts."""
    page_bytes: tuple[int, int] = (5_000, 60_000)
    """Range of the text size of a page, in bytes."""
    mean_page_bytes: int = 22_000
    """Mean text size of a page (lognormal, clipped to `page_bytes`)."""
    duplicate_fraction: float = 0.03
    """Share of pages that have exact copies at other URLs (same host or other hosts)."""
    near_duplicate_fraction: float = 0.02
    """Share of pages that have a copy with 1 to 5 words changed."""
    redirect_fraction: float = 0.02
    """Redirect URLs (301/302/307/308) per page; chains of 3 hops and one loop come on top."""
    error_fraction: float = 0.005
    """URLs answering 500 or 503, per page."""
    broken_link_fraction: float = 0.01
    """Links to URLs that answer 404, per page."""
    nofollow_fraction: float = 0.03
    """Share of random links marked rel=nofollow (plus pages reachable only through nofollow links)."""
    robots_crawl_delay: float = 1.0
    """Crawl-delay (seconds) written in the robots.txt of hosts that have one; tests set it small."""
    latency: float = 0.0
    """Mean added latency before each response, seconds (each host gets 0.5x to 1.5x of it); 0: none."""
    bandwidth: float = 0.0
    """Mean bandwidth of a host, bytes/s (each host gets 0.5x to 1.5x of it); 0: unlimited."""
    include_trap: bool = True
    """Give one host an infinite calendar (a spider trap) beside its normal pages."""
    shared_ip_hosts: int = 0
    """That many hosts share one IP address (per-IP politeness); 0 or 1: every host has its own."""
    port: int = 80
    """TCP port of every host; URLs carry it explicitly when it is not 80."""
    page_style: str = "plain"
    """"plain": paragraphs of text with links in them (what the tests were written against);
    "realistic": the same text and links inside a per-site template of metadata, inline scripts and
    styles, navigation, sidebar and footer boilerplate, and robots.txt files padded with groups for
    other crawlers (simweb/template.py; the benchmarks' heavy web)."""

    changing: bool = False
    """Pages change over time (simweb/changes.py): heavy-tailed Poisson change rates, Last-Modified and
    ETag on pages, conditional requests answered 304. Off: every page is the same at every request."""
    time_scale: float = 1.0
    """Simulated seconds of change per real second (60: an hour of changes in a minute)."""
    change_epoch: float = 0.0
    """Unix time at which every page is at its first version; changes happen after it. The server and
    the judge must agree on it, so it is part of the config (`crawlspace simweb serve --changing`
    sets it to the server's start)."""
    mirror_lag: float = 0.0
    """With `changing`: an exact copy (a mirror) serves its original as it was this many simulated
    seconds earlier, as a mirror that syncs late does; so a crawl meets a changed page's old versions
    at other URLs (the content-seen set must then judge them against current content only). 0: copies
    change with their original."""

    def __post_init__(self) -> None:
        checks: list[tuple[bool, str]] = [
            (1 <= self.hosts <= MAX_HOSTS, f"hosts must be in 1..{MAX_HOSTS}"),
            (self.mean_pages_per_host >= 1, "mean_pages_per_host must be >= 1"),
            (self.max_pages_per_host >= 1, "max_pages_per_host must be >= 1"),
            (self.mean_out_links >= 0, "mean_out_links must be >= 0"),
            (0 <= self.intra_host_link_fraction <= 1, "intra_host_link_fraction must be in [0, 1]"),
            (
                len(self.page_bytes) == 2 and 256 <= self.page_bytes[0] <= self.page_bytes[1],
                "page_bytes must be (low, high) with 256 <= low <= high",
            ),
            (
                self.page_bytes[0] <= self.mean_page_bytes <= self.page_bytes[-1],
                "mean_page_bytes must lie within page_bytes",
            ),
            (0 <= self.duplicate_fraction <= 0.5, "duplicate_fraction must be in [0, 0.5]"),
            (0 <= self.near_duplicate_fraction <= 0.5, "near_duplicate_fraction must be in [0, 0.5]"),
            (0 <= self.redirect_fraction <= 1, "redirect_fraction must be in [0, 1]"),
            (0 <= self.error_fraction <= 1, "error_fraction must be in [0, 1]"),
            (0 <= self.broken_link_fraction <= 1, "broken_link_fraction must be in [0, 1]"),
            (0 <= self.nofollow_fraction <= 1, "nofollow_fraction must be in [0, 1]"),
            (self.robots_crawl_delay >= 0, "robots_crawl_delay must be >= 0"),
            (self.latency >= 0, "latency must be >= 0"),
            (self.bandwidth >= 0, "bandwidth must be >= 0"),
            (0 <= self.shared_ip_hosts <= self.hosts, "shared_ip_hosts must be in 0..hosts"),
            (1 <= self.port <= 65535, "port must be in 1..65535"),
            (self.page_style in PAGE_STYLES, f"page_style must be one of {', '.join(PAGE_STYLES)}"),
            (0 < self.time_scale <= 1e6, "time_scale must be in (0, 1e6]"),
            (self.change_epoch >= 0, "change_epoch must be a Unix time >= 0"),
            (self.mirror_lag >= 0, "mirror_lag must be >= 0 (simulated seconds)"),
        ]
        for ok, message in checks:
            if not ok:
                raise SimWebConfigError(message)

    def replace(self, **changes: Any) -> SimWebConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["page_bytes"] = list(self.page_bytes)
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SimWebConfig:
        """Inverse of `to_dict`; unknown keys are errors (a typo must not silently give another web)."""
        names = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise SimWebConfigError(f"unknown simweb config key(s): {', '.join(unknown)}")
        values = dict(values)
        if "page_bytes" in values:
            low, high = values["page_bytes"]
            values["page_bytes"] = (int(low), int(high))
        return cls(**values)
