"""OPIC, On-line Page Importance Computation (Abiteboul, Preda & Cobena 2003; seed 004 §3.5).

Every seed starts with the same cash (1 each). When a page is fetched, its cash is split evenly
over its distinct out-links and the page keeps none; the frontier is ordered by cash. Cash reaching
a URL that is already fetched or handed on to a back queue joins the "history" (its importance
estimate, in OPIC's terms), and the cash of a page without out-links goes to the paper's virtual
page; a crawl that does not revisit lets neither flow on, so the cash held by pending URLs shrinks
as the crawl proceeds. Levels are therefore relative to the mean cash of the pending URLs (cash x
pending / total pending cash): a level means "so many times the typical pending URL" throughout the
crawl. A pending URL whose cash reaches a more urgent level is requeued there (base.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crawlspace.frontier import FrontierEntry
from crawlspace.policies.base import LogScale, Outlink, PageContent, Pending, ScoredPolicy, distinct_targets


class OnlineImportance(ScoredPolicy):
    """Greedy OPIC: the most cash first."""

    name = "opic"

    def __init__(self, levels: int = 16, seed_cash: float = 1.0) -> None:
        # relative cash 1 (the mean pending URL) sits in the middle level
        super().__init__(LogScale(levels, unit=2.0 ** -(levels // 2 - 2), step=2.0))
        self._seed_cash = seed_cash
        self._total_cash = 0.0  # handed to seeds; conserved
        self._pending_cash = 0.0  # held by URLs not yet handed on
        self._virtual_cash = 0.0  # of pages without out-links

    def _initial_score(self, entry: FrontierEntry) -> float:
        cash = self._fresh.pop(entry.url, None)
        if cash is None:  # a seed (or a URL nobody linked): new cash enters the system
            self._total_cash += self._seed_cash
            return self._seed_cash
        return cash

    def _added(self, record: Pending) -> None:
        self._pending_cash += record.score

    def _on_admit(self, record: Pending) -> None:
        self._pending_cash -= record.score  # its order is decided; it still collects cash until fetched

    def _level_of(self, cash: float) -> int:
        return self.scale.level(cash / self._mean_cash(0.0, 0))

    def _new_level(self, cash: float) -> int:
        return self.scale.level(cash / self._mean_cash(cash, 1))  # the mean with the newcomer

    def _mean_cash(self, extra_cash: float, extra_count: int) -> float:
        count = len(self._pending) + extra_count
        total = self._pending_cash + extra_cash
        return total / count if count and total > 0.0 else self._seed_cash

    def _observe(self, url: str, outlinks: Sequence[Outlink], content: PageContent | None) -> None:
        record = self._pending.get(url)
        cash = 0.0
        if record is not None and not record.done:
            cash = record.score
            record.score = 0.0
            if not record.admitted:  # fetched without a draw (a seed put back, a restored frontier)
                self._pending_cash -= cash
        targets = distinct_targets(url, outlinks)
        if not targets:
            self._virtual_cash += cash
            return
        share = cash / len(targets)
        pending = self._pending
        fresh = self._fresh
        for target in targets:
            other = pending.get(target)
            if other is None:
                fresh[target] = fresh.get(target, 0.0) + share  # new; a known URL's goes to history
            elif other.admitted:
                other.score += share  # passed on when it is fetched
            else:
                self._pending_cash += share
                self._set_score(other, other.score + share)

    def stats(self) -> dict[str, Any]:
        held = self._pending_cash
        return {
            **super().stats(),
            "total_cash": round(self._total_cash, 6),
            "pending_cash": round(held, 6),
            "virtual_cash": round(self._virtual_cash, 6),
        }
