"""CrawlConfig: typed, validated, immutable; TOML and keyword construction share the same checks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from crawlspace.config import ConfigError, CrawlConfig, UnknownKeyError


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


def test_one_hint_for_a_typo_in_python_toml_and_overrides(tmp_path: Path) -> None:
    """The same typo gets the same hint whichever way it is spelled out (issue 14.6)."""
    toml = tmp_path / "crawl.toml"
    toml.write_text("max_pagez = 5\n")
    attempts: dict[str, Callable[[], object]] = {
        "keyword": lambda: CrawlConfig(max_pagez=5),  # type: ignore[call-arg]
        "replace": lambda: CrawlConfig().replace(max_pagez=5),
        "toml": lambda: CrawlConfig.load(toml),
        "override": lambda: CrawlConfig.load(None, max_pagez=5),
    }
    for way, attempt in attempts.items():
        with pytest.raises(UnknownKeyError) as caught:
            attempt()
        assert str(caught.value).endswith("unknown key 'max_pagez'; did you mean 'max_pages'?"), way
        assert isinstance(caught.value, TypeError), way  # what Python code expects from a bad keyword
    with pytest.raises(UnknownKeyError, match=r"'wibble'$"):
        CrawlConfig(wibble=1)  # type: ignore[call-arg]  # nothing close: no hint
    assert CrawlConfig(max_pages=5).max_pages == 5


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
