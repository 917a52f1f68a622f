"""Shared helpers of the frontier tests: a fake clock and a driver that runs a frontier to empty."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from crawlspace.frontier import Frontier, Lease


class FakeClock:
    """The frontier's injected clock; tests move time by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def drain(
    frontier: Frontier,
    clock: FakeClock,
    *,
    duration: float = 0.1,
    limit: int = 100_000,
    on_lease: Callable[[Lease], dict[str, object] | None] | None = None,
) -> list[tuple[float, str]]:
    """Acquire and release (after `duration` of fake time) until the frontier is empty; returns
    (time handed out, url) in order. Leases are held one at a time, so timing is exact."""
    out: list[tuple[float, str]] = []
    for _ in range(limit):
        if len(frontier) == 0 and frontier.in_flight == 0:
            return out
        lease = frontier.acquire()
        if lease is None:
            wake = frontier.next_contact()
            assert wake is not None, f"frontier stuck with {len(frontier)} URLs queued"
            assert wake > clock.now, "acquire returned None although next_contact says now"
            clock.now = wake
            continue
        out.append((clock.now, lease.entry.url))
        options = on_lease(lease) if on_lease else None
        clock.advance(duration)
        frontier.release(lease, duration, **(options or {}))  # type: ignore[arg-type]
    raise AssertionError("frontier did not drain")
