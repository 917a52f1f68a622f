"""The documentation cannot drift: the configuration reference is regenerated and compared, every relative
link resolves, and every public name of the API is documented where users look for it."""

from __future__ import annotations

import re

import crawlspace
import crawlspace.hooks
from crawlspace.config import CrawlConfig
from tests.conftest import REPO, run_cli

DOCS = REPO / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_configuration_reference_regenerated_matches_the_committed_file() -> None:
    generated = run_cli("config-reference")
    assert generated.returncode == 0, generated.stderr
    committed = (DOCS / "configuration.md").read_text()
    header, table = committed.split("| key | type |", 1)
    assert "crawlspace config-reference" in header
    assert "| key | type |" + table == generated.stdout, "docs/configuration.md is stale: regenerate it"
    for key in CrawlConfig.__struct_fields__:
        assert f"| `{key}` |" in table


def test_relative_links_resolve() -> None:
    files = [REPO / "README.md", *DOCS.rglob("*.md")]
    checked = 0
    for path in files:
        for target in LINK.findall(path.read_text()):
            if "://" in target:
                continue
            assert (path.parent / target).resolve().exists(), f"{path.relative_to(REPO)} links to missing {target}"
            checked += 1
    assert checked > 20


def test_public_names_are_documented() -> None:
    docs = "\n".join(path.read_text() for path in DOCS.rglob("*.md"))
    for name in ("Crawler", "CrawlConfig", *crawlspace.hooks.__all__):
        assert re.search(rf"\b{name}\b", docs), f"{name} is exported but no page of docs/ mentions it"
    assert set(crawlspace.__all__) >= {"Crawler", "CrawlConfig", "CrawlStats", "CrawlError"}
    assert crawlspace.Crawler.__module__ == "crawlspace.api"  # imported on first use
