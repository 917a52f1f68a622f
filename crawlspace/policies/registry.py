"""Policy names, and building the configured policy (CLI and config name them; the engine asks here)."""

from __future__ import annotations

from pathlib import Path

from crawlspace.config import ConfigError, CrawlConfig
from crawlspace.frontier import Prioritizer
from crawlspace.parse import parse_html
from crawlspace.policies.backlinks import BacklinkCount
from crawlspace.policies.base import OrderingPolicy
from crawlspace.policies.bigsite import BigSiteFirst
from crawlspace.policies.focused import FocusedCrawl, TopicScorer
from crawlspace.policies.opic import OnlineImportance
from crawlspace.policies.pagerank import PartialPageRank
from crawlspace.policies.simple import BreadthFirstOrder, DepthFirstOrder, GivenPrioritizer, RandomOrder

POLICIES: dict[str, str] = {
    "bfs": "breadth-first: discovery order (the default)",
    "dfs": "depth-first: deepest links first",
    "random": "a random level per URL (the baseline of the classic evaluations)",
    "backlinks": "most in-links seen so far first",
    "pagerank": "highest partial PageRank over the known graph first, recomputed every k pages",
    "opic": "most OPIC cash first (cash split over out-links on download)",
    "bigsite": "hosts with the most pending pages first",
    "focused": "best-first by relevance of anchor text and page text to a topic",
}


def topic_scorer(config: CrawlConfig) -> TopicScorer:
    """The focused crawler's topic: the example document when given, else the keywords."""
    if config.focused_example:
        path = Path(config.focused_example)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"focused_example: cannot read {path}: {exc.strerror or exc}") from None
        if path.suffix.lower() in (".html", ".htm", ".xhtml") or data.lstrip()[:1] == b"<":
            page = parse_html(data, path.resolve().as_uri())
            text = f"{page.title} {page.text}"
        else:
            text = data.decode("utf-8", errors="replace")
        try:
            return TopicScorer.from_document(text)
        except ValueError as exc:
            raise ConfigError(f"focused_example: {path}: {exc}") from None
    try:
        return TopicScorer.from_keywords(config.focused_keywords)
    except ValueError:
        raise ConfigError("focused_keywords: no content word in the topic keywords") from None


def make_policy(config: CrawlConfig) -> OrderingPolicy:
    """The ordering policy `config.policy` names, with its options from the config."""
    name = config.policy
    levels = config.policy_levels
    if name == "bfs":
        return BreadthFirstOrder()
    if name == "dfs":
        return DepthFirstOrder(levels)
    if name == "random":
        return RandomOrder(levels, seed=config.policy_seed)
    if name == "backlinks":
        return BacklinkCount(levels)
    if name == "pagerank":
        return PartialPageRank(
            levels,
            interval=config.pagerank_interval,
            growth=config.pagerank_growth,
            damping=config.pagerank_damping,
        )
    if name == "opic":
        return OnlineImportance(levels)
    if name == "bigsite":
        return BigSiteFirst(levels)
    if name == "focused":
        return FocusedCrawl(
            topic_scorer(config),
            levels,
            anchor_weight=config.focused_anchor_weight,
            threshold=config.focused_threshold,
        )
    raise ConfigError(f"policy: unknown policy {name!r}; one of {', '.join(POLICIES)}")


_POLICY_METHODS = ("page_done", "requeue", "settled", "stats", "close")


def as_policy(prioritizer: Prioritizer | OrderingPolicy) -> OrderingPolicy:
    """A prioritizer given through the API (`Crawler(prioritizer=...)`): an ordering policy of this
    package (or any object with its methods) is fed page events; a plain frontier prioritizer only
    places URLs."""
    if all(callable(getattr(prioritizer, name, None)) for name in _POLICY_METHODS) and hasattr(
        prioritizer, "prioritizer"
    ):
        return prioritizer  # type: ignore[return-value]
    return GivenPrioritizer(prioritizer)  # type: ignore[arg-type]
