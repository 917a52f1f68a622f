"""A cluster crawl's nodes for the dashboard of one node's directory: their statuses in the cluster's
Redis, read as `crawlspace status --cluster` reads them (`crawlspace.api.cluster_status`), at most
every `every` seconds (each read is a connection and one MGET; an overview polled twice a second
must not make it twenty a second with a few tabs open)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class ClusterNodes:
    """`NodeStatus` (serve/view.py) over Redis."""

    def __init__(
        self,
        url: str,
        crawl_id: str | None,
        *,
        every: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url, self.crawl_id, self.every = url, crawl_id, every
        self._monotonic = monotonic
        self._read_at = -float("inf")
        self._last: dict[str, Any] = {"nodes": []}

    @classmethod
    def of_directory(cls, url: str, directory: Path, **options: Any) -> ClusterNodes:
        """The nodes of the cluster crawl whose node wrote `directory` (its cluster.json names the
        crawl id; without one, the default id)."""
        from crawlspace.crawl.node import saved_cluster
        from crawlspace.distributed.redislink import ClusterError

        try:
            saved = saved_cluster(directory)
        except ClusterError:
            saved = None
        return cls(url, None if saved is None else saved["crawl_id"], **options)

    def read(self) -> dict[str, Any]:
        now = self._monotonic()
        if now - self._read_at < self.every:
            return self._last
        self._read_at = now
        from crawlspace.api import CrawlError, cluster_status
        from crawlspace.distributed.redislink import redact

        try:
            self._last = cluster_status(self.url, crawl_id=self.crawl_id)
        except (CrawlError, OSError, ValueError) as exc:  # the cluster's Redis is down: said, not fatal
            self._last = {"nodes": self._last.get("nodes", []), "error": f"{redact(self.url)}: {exc}"}
        return self._last
