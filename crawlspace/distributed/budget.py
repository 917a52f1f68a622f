"""The crawl's page limit (`max_pages`), one counter for every partition: a fetch claims a unit first.

`Budget` is what the engine asks; `PageBudget` is the counter in one process or shared by the
processes of one machine (a `multiprocessing.Value`). Across machines the counter lives where the
transport lives (a Redis INCR, say): claim must be atomic there too, or two partitions could both
take the last page. `used` may run ahead of the pages fetched (a claim for a fetch that failed
still counts): a budget bounds requests, never lets more through.
"""

from __future__ import annotations

from typing import Any, Protocol


class Budget(Protocol):
    @property
    def used(self) -> int:
        """Units claimed so far, by every partition."""
        ...

    def exhausted(self) -> bool:
        """No unit left: the engine stops taking leases."""
        ...

    def claim(self) -> bool:
        """Take one unit for a fetch about to start; False (nothing taken) when none is left."""
        ...

    def set_used(self, used: int) -> None:
        """A resumed partition adds the pages its checkpoint counted."""
        ...


class PageBudget:
    """`limit` pages (None: no limit), counted here or in a counter shared by processes."""

    def __init__(self, limit: int | None, shared: Any = None) -> None:
        self.limit = limit
        self._shared = shared  # a multiprocessing.Value('q') when several processes share the budget
        self._local = 0

    def __repr__(self) -> str:
        return f"PageBudget({self.used} of {self.limit}{', shared' if self._shared is not None else ''})"

    @property
    def used(self) -> int:
        return int(self._shared.value) if self._shared is not None else self._local

    def exhausted(self) -> bool:
        return self.limit is not None and self.used >= self.limit

    def claim(self) -> bool:
        if self._shared is not None:
            with self._shared.get_lock():
                if self.limit is not None and self._shared.value >= self.limit:
                    return False
                self._shared.value += 1
            return True
        if self.limit is not None and self._local >= self.limit:
            return False
        self._local += 1
        return True

    def set_used(self, used: int) -> None:
        if self._shared is not None:
            with self._shared.get_lock():
                self._shared.value += used
        else:
            self._local = used
