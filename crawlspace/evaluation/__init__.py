"""Evaluations that drive whole crawls and judge them against the simulated web's ground truth.

They sit above the engine (they build one `CrawlEngine` per run and serve `crawlspace.simweb` to it),
so nothing below them, the policies included, imports them: a policy is judged here, it does not
judge itself. crawl_order.py: how fast each ordering policy collects PageRank (`crawlspace
evaluate`); the refresh evaluations of continuous crawling join it.
"""

from crawlspace.evaluation.crawl_order import EVALUATION_WEB, Evaluation, EvaluationSetup, PolicyRun, evaluate

__all__ = ["EVALUATION_WEB", "Evaluation", "EvaluationSetup", "PolicyRun", "evaluate"]
