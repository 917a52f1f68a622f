"""CrawlConfig: typed, validated, immutable; TOML and keyword construction share the same checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlspace.config import ConfigError, CrawlConfig


def test_defaults_fit_the_real_web() -> None:
    config = CrawlConfig()
    assert config.min_delay >= 1.0
    assert config.allow_private_addresses is False
    assert config.robots_agent == "crawlspace"


def test_keyword_construction_is_validated() -> None:
    with pytest.raises(ConfigError, match="min_delay"):
        CrawlConfig(min_delay=-0.5)
    with pytest.raises(ConfigError, match="concurrency"):
        CrawlConfig(concurrency="many")  # type: ignore[arg-type]


def test_immutable() -> None:
    config = CrawlConfig()
    with pytest.raises(AttributeError):
        config.min_delay = 3.0  # type: ignore[misc]


def test_toml_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "crawl.toml"
    path.write_text('min_delay = 0.25\nuser_agent = "bot/1.0"\n[resolve]\n"a.test" = "127.0.0.2"\n')
    config = CrawlConfig.load(path, max_pages=10)
    assert config.min_delay == 0.25
    assert config.max_pages == 10
    assert config.resolve == {"a.test": "127.0.0.2"}
    assert config.user_agent == "bot/1.0"


def test_unknown_key_suggests_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean 'max_pages'"):
        CrawlConfig.from_mapping({"max_page": 3})


def test_cross_field_check() -> None:
    with pytest.raises(ConfigError, match="max_delay"):
        CrawlConfig(min_delay=5.0, max_delay=1.0)


def test_differences_report_changed_keys() -> None:
    a = CrawlConfig()
    b = a.replace(min_delay=2.0)
    assert a.differences(b) == {"min_delay": (1.0, 2.0)}


def test_configuration_reference_is_current() -> None:
    from crawlspace.config import reference_markdown

    committed = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    assert reference_markdown() in committed, "docs/configuration.md is stale: regenerate it (see its header)"
