"""Choosing a policy by name: config validation, options, topics from keywords or an example."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlspace.config import POLICY_NAMES, ConfigError, CrawlConfig
from crawlspace.frontier import FrontierEntry
from crawlspace.policies import POLICIES, FocusedCrawl, PartialPageRank, RandomOrder, make_policy


def test_every_named_policy_is_built() -> None:
    assert tuple(POLICIES) == POLICY_NAMES
    for name in POLICY_NAMES:
        config = CrawlConfig(policy=name, focused_keywords=["topic"], policy_levels=8)
        policy = make_policy(config)
        try:
            assert policy.name == name
            assert policy.prioritizer.levels == (1 if name == "bfs" else 8)
            assert policy.observes_pages == (name not in ("bfs", "dfs", "random"))
        finally:
            policy.close()


def test_options_reach_the_policy() -> None:
    policy = make_policy(CrawlConfig(policy="pagerank", pagerank_interval=7, pagerank_damping=0.5))
    assert isinstance(policy, PartialPageRank)
    assert policy.stats()["interval_pages"] == 7 and policy.stats()["damping"] == 0.5
    first = make_policy(CrawlConfig(policy="random", policy_seed=5))
    second = make_policy(CrawlConfig(policy="random", policy_seed=5))
    assert isinstance(first, RandomOrder) and isinstance(second, RandomOrder)
    entries = [FrontierEntry(f"http://a.test/{i}") for i in range(20)]
    assert [first.priority(e) for e in entries] == [second.priority(e) for e in entries]


def test_policy_names_are_checked() -> None:
    with pytest.raises(ConfigError, match="did you mean 'pagerank'"):
        CrawlConfig(policy="pagernk")
    with pytest.raises(ConfigError, match="needs a topic"):
        CrawlConfig(policy="focused")
    with pytest.raises(ConfigError, match="policy_levels"):
        CrawlConfig.from_mapping({"policy_levels": 1})
    with pytest.raises(ConfigError, match="unknown key 'polcy'"):
        CrawlConfig.from_mapping({"polcy": "bfs"})


def test_topic_from_an_example_document(tmp_path: Path) -> None:
    html = tmp_path / "example.html"
    html.write_text("<html><title>Bicycle repair</title><body><p>Bicycle chain and bicycle brakes.</p></body></html>")
    policy = make_policy(CrawlConfig(policy="focused", focused_example=str(html), focused_keywords=["ignored"]))
    assert isinstance(policy, FocusedCrawl)
    assert policy.scorer.terms == ["bicycle", "brakes", "chain", "repair"]
    text = tmp_path / "example.txt"
    text.write_text("Sailing boats and sailing knots.")
    policy = make_policy(CrawlConfig(policy="focused", focused_example=str(text)))
    assert isinstance(policy, FocusedCrawl)
    assert policy.scorer.terms == ["boats", "knots", "sailing"]
    with pytest.raises(ConfigError, match="cannot read"):
        make_policy(CrawlConfig(policy="focused", focused_example=str(tmp_path / "missing.txt")))
    (tmp_path / "empty.txt").write_text("the and of")
    with pytest.raises(ConfigError, match="no terms"):
        make_policy(CrawlConfig(policy="focused", focused_example=str(tmp_path / "empty.txt")))
    with pytest.raises(ConfigError, match="no content word"):
        make_policy(CrawlConfig(policy="focused", focused_keywords=["the"]))
