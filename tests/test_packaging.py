"""The declared dependencies are exactly what the code imports: `pip install crawlspace` gives a package that
starts (a module missing from `[project] dependencies` only shows in a venv built without the lock file, which
is what .ci/user-install builds), and nothing only the tests need is installed for users."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
FIRST_PARTY = {"crawlspace", "tests", "bench", "examples"}


def _distribution(requirement: str) -> str:
    """The normalized distribution name of a requirement string (`FastWARC>=2; sys_platform...` -> fastwarc)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name is not None, requirement
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def _imported_modules(root: Path) -> dict[str, set[str]]:
    """Top-level third-party modules imported anywhere under `root` (lazy imports in functions too) -> files."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if any(part.startswith(".venv") for part in path.relative_to(root).parts):
            continue  # a virtualenv a benchmark made for its opponent (bench/.venv-scrapy): not our imports
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".", 1)[0]
                local = (path.parent / f"{top}.py").exists() or (path.parent / top).is_dir()  # a script's sibling
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY and not local:
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def _providers(module: str) -> set[str]:
    """The installed distributions that provide a top-level module."""
    return {_distribution(name) for name in importlib.metadata.packages_distributions().get(module, [])}


RUNTIME = {_distribution(requirement) for requirement in PYPROJECT["project"]["dependencies"]}
TEST_EXTRA = {_distribution(requirement) for requirement in PYPROJECT["project"]["optional-dependencies"]["test"]}


def test_every_module_the_package_imports_is_a_declared_dependency() -> None:
    undeclared = {
        module: sorted(files)
        for module, files in _imported_modules(REPO / "crawlspace").items()
        if not _providers(module) & RUNTIME
    }
    assert not undeclared, f"imported by the package but not in [project] dependencies: {undeclared}"


def test_every_declared_dependency_is_imported_by_the_package() -> None:
    provided = {dist for module in _imported_modules(REPO / "crawlspace") for dist in _providers(module)}
    unused = RUNTIME - provided
    assert not unused, f"in [project] dependencies but never imported by the package (test-only?): {unused}"


def test_dependencies_are_listed_once() -> None:
    names = [_distribution(requirement) for requirement in PYPROJECT["project"]["dependencies"]]
    assert len(names) == len(set(names)), sorted(name for name in names if names.count(name) > 1)
    assert not RUNTIME & TEST_EXTRA, RUNTIME & TEST_EXTRA


def test_what_the_tests_and_benchmarks_import_is_declared() -> None:
    """Scrapy (and its Twisted) is the benchmark's opponent: bench/throughput installs it in a venv of its own;
    so does bench/search for its references bm25s and tantivy."""
    declared = RUNTIME | TEST_EXTRA
    for root in (REPO / "tests", REPO / "examples", REPO / "bench"):
        undeclared = {
            module: sorted(files)
            for module, files in _imported_modules(root).items()
            if module not in ("scrapy", "twisted", "bm25s", "tantivy") and not _providers(module) & declared
        }
        assert not undeclared, f"imported under {root.name}/ but declared nowhere: {undeclared}"


def test_the_helper_sees_real_imports() -> None:
    """The checks above would pass vacuously if the scan found nothing."""
    modules = _imported_modules(REPO / "crawlspace")
    assert {"aiohttp", "httptools", "msgspec", "selectolax", "pycares"} <= set(modules)
    assert "fastwarc" not in modules and "protego" not in modules  # test-only: the package has its own
    assert _providers("yaml") == set() or "pyyaml" in _providers("yaml")
    assert _distribution("FastWARC>=2.0; python_version>'3'") == "fastwarc"
