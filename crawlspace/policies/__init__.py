"""Crawl ordering policies: which of the discovered URLs the crawl fetches next (seed 004 §3, seed 002).

Who fills and who drains. A policy is the prioritizer of the frontier's F front queues: the
frontier asks it for a URL's level when the URL enters (0 the most urgent) and, for the policies
whose scores change later, asks it to `admit` each URL it draws from a front queue. The engine
feeds it the crawl's events: after every fetch that ended for good, `page_done` with the page's
filtered out-links (also those to URLs already seen: an in-link is an in-link) and its text; then
it adds back into the frontier what `requeue` returns, the URLs whose level rose. New URLs wait
in the URL-seen buffer before they enter the frontier; what the policy learnt about them meanwhile
sets their first level, and after each drain of the buffer the engine calls `settled`.

Invariants. A policy changes only the order: the set of URLs fetched, robots.txt compliance and
every politeness rule are the frontier's and the engine's alone, whatever the policy answers.
Each URL is handed on to a back queue exactly once, however often it was requeued (`admit` drops
the stale copies). Levels only rise, so a URL is requeued at most F - 1 times. The breadth-first
default is the frontier's own single-queue prioritizer, at no cost.

The policies: bfs, dfs, random (simple.py), backlinks, pagerank, opic, bigsite, focused. They know
nothing of the engine that consults them: the evaluation of seed 002's figures, which crawls the
simulated web with each of them, sits above the engine in `crawlspace.evaluation` (`crawlspace evaluate`).
"""

from crawlspace.policies.backlinks import BacklinkCount
from crawlspace.policies.base import LogScale, OrderingPolicy, Outlink, PageContent, ScoredPolicy
from crawlspace.policies.bigsite import BigSiteFirst
from crawlspace.policies.focused import FocusedCrawl, TopicScorer
from crawlspace.policies.opic import OnlineImportance
from crawlspace.policies.pagerank import PartialPageRank
from crawlspace.policies.registry import POLICIES, as_policy, make_policy
from crawlspace.policies.simple import BreadthFirstOrder, DepthFirstOrder, RandomOrder

__all__ = [
    "POLICIES",
    "BacklinkCount",
    "BigSiteFirst",
    "BreadthFirstOrder",
    "DepthFirstOrder",
    "FocusedCrawl",
    "LogScale",
    "OnlineImportance",
    "OrderingPolicy",
    "Outlink",
    "PageContent",
    "PartialPageRank",
    "RandomOrder",
    "ScoredPolicy",
    "TopicScorer",
    "as_policy",
    "make_policy",
]
