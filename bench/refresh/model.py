"""The refresher without the engine: the real `Refresher` (estimates, policy fits, the feed) driven by a
fake clock against the changing simulated web's change model, judged by the same `crawl_freshness` as a
crawl's server log. It separates what the refresh logic achieves from what the engine adds (politeness,
the frontier's queue between a hand-out and its fetch, discovery's share of the budget), and shows how
far the estimates are from the true rates:

    .venv/bin/python bench/refresh/model.py [--seconds 120 --warmup 60 --rates estimated,true --wait 0,0.6]

`--rates true` replaces every page's estimate by its true rate (the policies' formula, realized by the
schedule and the feed); `--wait W` delays each fetch after its hand-out by an exponential time of mean W
seconds, as the frontier's queue does in a crawl. The first pass fetches every page at `max_rate`.
Defaults: evaluate-refresh's web and budget (`crawlspace.evaluation.refresh.RefreshSetup`).
"""

from __future__ import annotations

import argparse
import heapq
import random
from email.utils import formatdate

from crawlspace.evaluation.refresh import REFRESH_WEB, RefreshSetup
from crawlspace.refresh.policies import POLICIES
from crawlspace.refresh.refresher import Refresher
from crawlspace.refresh.schedule import MemorySchedule
from crawlspace.simweb import SimWeb
from crawlspace.simweb.freshness import crawl_freshness
from crawlspace.simweb.generator import split_url
from crawlspace.simweb.server import LogEntry

EPOCH = 1_000_000.0
STEP = 0.05  # seconds between two looks at the schedule (the engine's feed looks every 0.25 s)


class _TrueRates(Refresher):
    """A refresher told each page's true rate instead of estimating it."""

    truth: dict[str, float]
    current: str = ""

    def fetched(self, url: str, **observation: object) -> float:  # type: ignore[override]
        self.current = url
        return super().fetched(url, **observation)  # type: ignore[arg-type]

    def _rate(self, record: object, host: str) -> float:  # type: ignore[override]
        return self.truth[self.current]


def run(policy: str, setup: RefreshSetup, *, true_rates: bool, wait: float, seed: int = 1) -> tuple[float, int]:
    """Freshness after the warmup and the page fetches in that window."""
    web = SimWeb.generate(setup.web.replace(change_epoch=EPOCH))
    changes = web.changes
    assert changes is not None
    urls = {web.url_of(page): page for page in range(web.data.pages)}
    clock = [EPOCH]
    made = (_TrueRates if true_rates else Refresher)(
        MemorySchedule(), POLICIES[policy](min_interval=setup.min_interval, max_interval=setup.max_interval),
        setup.max_rate * setup.refresh_share, min_interval=setup.min_interval, max_interval=setup.max_interval,
        clock=lambda: clock[0], quality="none",
    )  # fmt: skip
    if isinstance(made, _TrueRates):
        made.truth = {url: min(changes.rate(page), 1e6) for url, page in urls.items()}
    log: list[LogEntry] = []

    def fetch(url: str) -> None:
        version = changes.version(urls[url], clock[0])
        host, port, path = split_url(url)
        log.append(LogEntry(clock[0], clock[0], 0, "127.0.0.1", f"{host}:{port}", path, 200, 0, "GET"))
        made.fetched(
            url, status=200, fingerprint=version.number, etag=None,
            last_modified=formatdate(int(version.changed_at), usegmt=True), depth=0,
        )  # fmt: skip

    for index, url in enumerate(urls):  # the first pass, at the whole budget
        clock[0] = EPOCH + index / setup.max_rate
        fetch(url)
    generator = random.Random(seed)
    queued: list[tuple[float, str]] = []
    while clock[0] < EPOCH + setup.seconds:
        clock[0] += STEP
        for url, _ in made.due(256, lease=600.0):
            heapq.heappush(queued, (clock[0] + (generator.expovariate(1.0 / wait) if wait else 0.0), url))
        while queued and queued[0][0] <= clock[0]:
            fetch(heapq.heappop(queued)[1])
    start, end = EPOCH + setup.warmup, EPOCH + setup.seconds
    judged = crawl_freshness(web, log, start=start, end=end)
    return judged.freshness, sum(1 for entry in log if start <= entry.arrived < end)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default="optimal,uniform,proportional")
    parser.add_argument("--seconds", type=float, default=RefreshSetup.seconds)
    parser.add_argument("--warmup", type=float, default=RefreshSetup.warmup)
    parser.add_argument("--max-rate", type=float, default=RefreshSetup.max_rate)
    parser.add_argument("--hosts", type=int, default=REFRESH_WEB.hosts)
    parser.add_argument("--time-scale", type=float, default=REFRESH_WEB.time_scale)
    parser.add_argument("--rates", default="estimated,true", help="estimated, true or both")
    parser.add_argument("--wait", default="0", help="comma-separated mean waits between hand-out and fetch")
    args = parser.parse_args()
    setup = RefreshSetup(
        web=REFRESH_WEB.replace(hosts=args.hosts, time_scale=args.time_scale), seconds=args.seconds,
        warmup=args.warmup, max_rate=args.max_rate,
    )  # fmt: skip
    policies = args.policies.split(",")
    print(f"{'rates':>10} {'wait':>5} " + " ".join(f"{name:>14}" for name in policies))
    for rates in args.rates.split(","):
        for wait in (float(value) for value in args.wait.split(",")):
            cells = []
            for policy in policies:
                freshness, fetches = run(policy, setup, true_rates=rates == "true", wait=wait)
                cells.append(f"{freshness:.3f} ({fetches:>5})")
            print(f"{rates:>10} {wait:>5g} " + " ".join(f"{cell:>14}" for cell in cells), flush=True)


if __name__ == "__main__":
    main()
