"""The classic evaluation of crawl orderings (Cho, Garcia-Molina & Page 1998; Najork & Wiener 2001;
Arasu et al. 2001), reproduced on the simulated web: how fast does each policy collect PageRank?

For each policy, a fresh simulated-web server (`serve_in_background`) is crawled to the end by the
real engine, and the order of the crawl is read from the server's request log (what reached the
server, in arrival order; robots.txt requests left out). Against the ground truth it gives, after
each page: the fraction of the total PageRank of the reachable web collected (the pages a complete
crawl from the same seeds fetches: `SimWeb.expected_fetches`), the fraction of the "hot" pages
crawled (the top 10% by PageRank, Cho et al.'s measure), and, when a topic is given, the harvest
rate (relevant pages / pages crawled, relevance judged by the focused crawler's scorer on the
served page).

Why the evaluation web and settings look the way they do. The frontier's front queues are where a
policy decides, but what leaves them is shaped by politeness: a host's URLs go to its back queue
and come out one per politeness gap, and B back queues serve B hosts at a time. With few hosts,
or many back queues and a high concurrency, every host is active at once, each back queue drains
in discovery order, and all policies produce nearly the same crawl. So the evaluation uses many
hosts, few back queues (B), a concurrency of about B, and a short politeness gap: then the next
host to get a back queue, and the URLs drawn with it, are the policy's choice.
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crawlspace.config import CrawlConfig
from crawlspace.crawl.engine import CrawlEngine
from crawlspace.parse import parse_html
from crawlspace.policies.focused import TopicScorer
from crawlspace.simweb import LogEntry, SimWeb, SimWebConfig, serve_in_background
from crawlspace.simweb.generator import unescape_unreserved

ALL_POLICIES = ("bfs", "dfs", "random", "backlinks", "pagerank", "opic", "bigsite", "focused")
MARKS = (0.1, 0.2, 0.5)
HOT_FRACTION = 0.1

EVALUATION_WEB = SimWebConfig(
    hosts=400,
    seed=3,
    mean_pages_per_host=8.0,
    max_pages_per_host=150,
    robots_crawl_delay=0.02,
    include_trap=False,
)


@dataclass(frozen=True)
class EvaluationSetup:
    """The web and the crawl settings shared by every policy's crawl."""

    web: SimWebConfig = EVALUATION_WEB
    seeds: int = 5
    concurrency: int = 2
    back_queues: int | None = 2  # None: the engine's default (3 x concurrency)
    min_delay: float = 0.0
    delay_factor: float = 2.0
    error_delay: float = 0.1
    max_seconds: float = 600.0
    policy_levels: int = 16
    pagerank_interval: int = 50
    topic: tuple[str, ...] = ()  # empty: chosen from the web's vocabulary (topic_for)
    relevance_threshold: float = 0.08
    seen_buffer_urls: int = 32

    def crawl_config(self, policy: str, hosts_file: Path, topic: Sequence[str]) -> CrawlConfig:
        values: dict[str, Any] = {
            "policy": policy,
            "policy_levels": self.policy_levels,
            "pagerank_interval": self.pagerank_interval,
            "hosts_file": str(hosts_file),
            "allow_private_addresses": True,
            "concurrency": self.concurrency,
            "min_delay": self.min_delay,
            "delay_factor": self.delay_factor,
            "error_delay": self.error_delay,  # a 503 would otherwise hold its host (and the crawl's end) 5 s
            "max_seconds": self.max_seconds,
            "progress_interval": 5.0,
            "store_sync": False,
            # a host whose robots.txt answers 5xx is disallowed at once, as the ground truth has it,
            # rather than retried later: the evaluation is about order, not about robots.txt retries
            "robots_max_retries": 0,
            # new URLs reach the front queues soon after they are found, not in a few large batches:
            # in a crawl of millions the default buffer is a small share of the frontier, here it
            # would hold most of the web and turn every policy into a crawl by generations
            "seen_buffer_urls": self.seen_buffer_urls,
            "focused_keywords": list(topic),
            "focused_threshold": self.relevance_threshold,
        }
        if self.back_queues is not None:
            values["back_queues"] = self.back_queues
        return CrawlConfig.from_mapping(values, source="evaluation")


@dataclass
class PolicyRun:
    """One policy's crawl, as the server saw it, and its curves."""

    policy: str
    order: list[str]  # URLs of the reachable web in the order they were first requested
    pagerank: list[float]  # cumulative fraction of the total PageRank after each page
    hot: list[float]  # cumulative fraction of the hot pages
    harvest: list[float]  # cumulative harvest rate (empty without a topic)
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)

    def at(self, curve: Sequence[float], fraction: float, total: int) -> float:
        """A curve's value once `fraction` of the reachable web was crawled."""
        pages = max(1, math.ceil(fraction * total))
        if not curve:
            return float("nan")
        return curve[min(pages, len(curve)) - 1]


@dataclass
class Evaluation:
    setup: EvaluationSetup
    expected_pages: int
    hot_pages: int
    topic: list[str]
    relevant_pages: int
    runs: list[PolicyRun]
    ideal: list[float]  # the PageRank curve of an omniscient crawler (pages by true PageRank)

    def table(self) -> list[dict[str, Any]]:
        """PageRank mass (and hot pages, harvest) at 10%, 20% and 50% crawled, per policy."""
        rows = []
        for run in self.runs:
            row: dict[str, Any] = {"policy": run.policy, "pages": len(run.order), "seconds": round(run.seconds, 1)}
            for mark in MARKS:
                row[f"pagerank@{int(mark * 100)}%"] = round(run.at(run.pagerank, mark, self.expected_pages), 4)
            for mark in MARKS:
                row[f"hot@{int(mark * 100)}%"] = round(run.at(run.hot, mark, self.expected_pages), 4)
            if run.harvest:
                for mark in MARKS:
                    row[f"harvest@{int(mark * 100)}%"] = round(run.at(run.harvest, mark, self.expected_pages), 4)
            rows.append(row)
        return rows

    def ranking(self, fraction: float = 0.2) -> list[str]:
        """Policies by PageRank collected at `fraction` crawled, best first."""
        runs = sorted(self.runs, key=lambda run: -run.at(run.pagerank, fraction, self.expected_pages))
        return [run.policy for run in runs]


def topic_for(web: SimWeb, words: int = 20, seed: int = 0) -> list[str]:
    """A topic of `words` keywords drawn from the web's title vocabulary (deterministic)."""
    vocabulary = web.renderer.corpus.words
    rng = np.random.default_rng(seed)
    # titles draw from vocabulary ranks 100..2999; the rarer half keeps body text from matching by chance
    picks = rng.choice(np.arange(1500, 3000), size=words, replace=False)
    return [vocabulary[int(index)] for index in picks]


def crawl_order(web: SimWeb, log: Iterable[LogEntry], expected: set[str]) -> list[str]:
    """URLs of `expected` in the order of their first request in a server log."""
    order: list[str] = []
    seen: set[str] = set()
    for entry in sorted(log, key=lambda item: item.arrived):
        if entry.path == "/robots.txt":
            continue
        host = entry.host.rsplit(":", 1)[0].lower() if ":" in entry.host else entry.host.lower()
        try:
            url = web.origin(host) + unescape_unreserved(entry.path.split("#", 1)[0])
        except KeyError:
            continue
        if url in expected and url not in seen:
            seen.add(url)
            order.append(url)
    return order


def run_policy(
    web: SimWeb, policy: str, setup: EvaluationSetup, directory: Path, topic: Sequence[str]
) -> tuple[list[LogEntry], list[str], dict[str, Any], float]:
    """Serve the web, crawl it to the end with `policy`, return the log, seeds, crawl stats and seconds."""
    with serve_in_background(web, directory / "simweb", seeds=setup.seeds) as server:
        config = setup.crawl_config(policy, server.hosts_file, topic)
        engine = CrawlEngine(config, directory / "crawl", live_progress=False)
        engine.add_seeds(server.seeds)
        began = time.monotonic()
        stats = run_to_end(engine)
        seconds = time.monotonic() - began
        stats["back_queues"] = engine.frontier.back_queues
        seeds = list(server.seeds)
    return server.read_log(), seeds, stats, seconds


def run_to_end(engine: CrawlEngine) -> dict[str, Any]:
    """Run a crawl to its end on uvloop (asyncio's loop without it); its stats."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        return asyncio.run(engine.run()).to_dict()
    return uvloop.run(engine.run()).to_dict()


def relevance(web: SimWeb, urls: Iterable[str], scorer: TopicScorer, threshold: float) -> dict[str, bool]:
    """Is each URL's served page relevant to the topic (by the focused crawler's own scorer)?"""
    verdicts: dict[str, bool] = {}
    for url in urls:
        if web.status(url) != 200 or web.redirect_target(url) is not None:
            verdicts[url] = False
            continue
        page = parse_html(web.body(url), url, "text/html; charset=utf-8")
        verdicts[url] = scorer.page_score(page.title, page.text) >= threshold
    return verdicts


def evaluate(
    policies: Sequence[str],
    out: Path,
    setup: EvaluationSetup = EvaluationSetup(),
    *,
    progress: Callable[[str], None] | None = None,
) -> Evaluation:
    """Crawl the evaluation web once per policy, write CSV, PNG and JSON into `out`, return the result."""
    unknown = [name for name in policies if name not in ALL_POLICIES]
    if unknown:
        raise ValueError(f"unknown policies: {', '.join(unknown)} (known: {', '.join(ALL_POLICIES)})")
    say = progress or (lambda message: None)
    out.mkdir(parents=True, exist_ok=True)
    web = SimWeb.generate(setup.web)
    say(f"simulated web: {web!r}")
    ranks = web.pagerank()
    topic = list(setup.topic) or topic_for(web)
    scorer = TopicScorer.from_keywords(topic)
    runs: list[PolicyRun] = []
    expected: set[str] = set()
    hot: set[str] = set()
    relevant: dict[str, bool] = {}
    ideal: list[float] = []
    for name in policies:
        say(f"crawling with {name} ...")
        log, seeds, stats, seconds = run_policy(web, name, setup, out / name, topic)
        if not expected:
            expected = web.expected_fetches(seeds)
            by_rank = sorted(expected, key=lambda url: -ranks[url])
            hot = set(by_rank[: max(1, round(HOT_FRACTION * len(expected)))])
            total = sum(ranks[url] for url in expected)
            ideal = (np.cumsum([ranks[url] for url in by_rank]) / total).tolist()
            relevant = relevance(web, expected, scorer, setup.relevance_threshold)
        order = crawl_order(web, log, expected)
        mass = np.cumsum([ranks[url] for url in order]) / total if order else np.empty(0)
        hot_curve = np.cumsum([url in hot for url in order]) / len(hot) if order else np.empty(0)
        harvest = np.cumsum([relevant[url] for url in order]) / np.arange(1, len(order) + 1) if order else np.empty(0)
        run = PolicyRun(name, order, mass.tolist(), hot_curve.tolist(), harvest.tolist(), seconds, stats)
        runs.append(run)
        say(
            f"  {name}: {len(order)} of {len(expected)} pages in {seconds:.1f} s; PageRank at 20% crawled "
            f"{run.at(run.pagerank, 0.2, len(expected)):.3f}"
        )
    evaluation = Evaluation(
        setup=setup,
        expected_pages=len(expected),
        hot_pages=len(hot),
        topic=topic,
        relevant_pages=sum(relevant.values()),
        runs=runs,
        ideal=ideal,
    )
    write_outputs(evaluation, out)
    return evaluation


def write_outputs(evaluation: Evaluation, out: Path) -> None:
    total = evaluation.expected_pages
    with open(out / "curves.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["policy", "pages_crawled", "fraction_crawled", "pagerank_fraction", "hot_fraction", "harvest"])
        for run in evaluation.runs:
            for index, value in enumerate(run.pagerank):
                harvest = f"{run.harvest[index]:.6f}" if run.harvest else ""
                writer.writerow(
                    [
                        run.policy,
                        index + 1,
                        f"{(index + 1) / total:.6f}",
                        f"{value:.6f}",
                        f"{run.hot[index]:.6f}",
                        harvest,
                    ]
                )
    table = evaluation.table()
    summary = {
        "setup": {**asdict(evaluation.setup), "web": evaluation.setup.web.to_dict()},
        "expected_pages": total,
        "hot_pages": evaluation.hot_pages,
        "topic": evaluation.topic,
        "relevant_pages": evaluation.relevant_pages,
        "table": table,
        "ranking_at_20%": evaluation.ranking(0.2),
        "ideal": {
            f"pagerank@{int(m * 100)}%": round(evaluation.ideal[max(1, math.ceil(m * total)) - 1], 4) for m in MARKS
        },
        "policy_stats": {run.policy: run.stats.get("policy", {}) for run in evaluation.runs},
        "crawl": {
            run.policy: {
                key: run.stats.get(key) for key in ("pages_fetched", "pages_per_second", "termination", "back_queues")
            }
            for run in evaluation.runs
        },
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    with open(out / "table.csv", "w", newline="", encoding="utf-8") as handle:
        rows = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(key for row in table for key in row)))
        rows.writeheader()
        rows.writerows(table)
    plot(evaluation, out)


def plot(evaluation: Evaluation, out: Path) -> None:
    """pagerank.png (PageRank mass and hot pages against pages crawled) and harvest.png."""
    from matplotlib.figure import Figure  # heavy: only when plotting

    total = evaluation.expected_pages
    figure = Figure(figsize=(13, 5.5), layout="constrained")
    mass_axes, hot_axes = figure.subplots(1, 2)
    x_ideal = np.arange(1, len(evaluation.ideal) + 1) / total
    mass_axes.plot(x_ideal, evaluation.ideal, color="0.6", linestyle=":", label="ideal (true PageRank order)")
    for run in evaluation.runs:
        x = np.arange(1, len(run.pagerank) + 1) / total
        mass_axes.plot(x, run.pagerank, label=run.policy, linewidth=1.4)
        hot_axes.plot(x, run.hot, label=run.policy, linewidth=1.4)
    hot_axes.plot([0, 1], [0, 1], color="0.6", linestyle=":", label="expected of a random order")
    for axes, title, label in (
        (mass_axes, "PageRank collected", "fraction of total PageRank"),
        (hot_axes, f"Hot pages crawled (top {int(HOT_FRACTION * 100)}% by PageRank)", "fraction of hot pages"),
    ):
        axes.set_xlim(0, 1)
        axes.set_ylim(0, 1.01)
        axes.set_xlabel(f"fraction of pages crawled (of {total})")
        axes.set_ylabel(label)
        axes.set_title(title)
        axes.grid(True, alpha=0.3)
        for mark in MARKS:
            axes.axvline(mark, color="0.85", linewidth=0.8)
        axes.legend(loc="lower right", fontsize="small")
    setup = evaluation.setup
    figure.suptitle(
        f"Crawl orderings on a simulated web ({setup.web.hosts} hosts, {total} reachable pages, "
        f"{setup.seeds} seeds; concurrency {setup.concurrency}, B={evaluation.runs[0].stats.get('back_queues')})"
    )
    figure.savefig(out / "pagerank.png", dpi=110)
    if not any(run.harvest for run in evaluation.runs):
        return
    relevant = evaluation.relevant_pages
    start = min(50, total - 1)  # the rate over the first pages is all noise
    figure = Figure(figsize=(13, 5.5), layout="constrained")
    rate_axes, found_axes = figure.subplots(1, 2)
    for run in evaluation.runs:
        if not run.harvest:
            continue
        width = 2.0 if run.policy == "focused" else 1.0
        pages = np.arange(1, len(run.harvest) + 1)
        found = np.asarray(run.harvest) * pages  # relevant pages so far
        rate_axes.plot(pages[start:], run.harvest[start:], label=run.policy, linewidth=width)
        found_axes.plot(pages / total, found / max(relevant, 1), label=run.policy, linewidth=width)
    rate_axes.axhline(relevant / total, color="0.6", linestyle=":", label="share of relevant pages")
    found_axes.plot([0, 1], [0, 1], color="0.6", linestyle=":", label="expected of a topic-blind order")
    rate_axes.set_xlabel("pages crawled")
    rate_axes.set_ylabel("harvest rate (relevant pages / pages crawled)")
    rate_axes.set_title(f"Harvest rate (from page {start + 1} on)")
    found_axes.set_xlabel(f"fraction of pages crawled (of {total})")
    found_axes.set_ylabel(f"fraction of the {relevant} relevant pages crawled")
    found_axes.set_title("Relevant pages found")
    found_axes.set_xlim(0, 1)
    found_axes.set_ylim(0, 1.01)
    for axes in (rate_axes, found_axes):
        axes.grid(True, alpha=0.3)
        axes.legend(loc="upper right" if axes is rate_axes else "lower right", fontsize="small")
    figure.suptitle(
        f"Focused crawling: topic of {len(evaluation.topic)} keywords, relevance >= "
        f"{evaluation.setup.relevance_threshold} ({relevant} of {total} pages relevant)"
    )
    figure.savefig(out / "harvest.png", dpi=110)
