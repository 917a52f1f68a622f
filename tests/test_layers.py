"""The package's floors hold: imports point down, never up, and no two modules import each other.

The graph is read from the source with `ast`, so it sees every import a reader sees: at module
level, inside functions (lazy imports) and under `if TYPE_CHECKING:` (a type is a dependency too).
`from package import name` counts as an import of `package.name` when that is a module, else of
the package's `__init__`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "crawlspace"

LOWER = ("frontier", "urls", "robots", "seen", "policies", "parse", "fetch", "dns", "store", "hooks")
"""The boxes of IIR fig. 20.1 and the extension protocols: the engine composes them, they never call it."""
UPPER = ("crawl", "api", "cli", "demo", "evaluation", "simweb")
"""The engine and what drives it (the API, the command line, the evaluations), and the simulated web."""

KNOWN_CYCLES: set[frozenset[str]] = set()
"""Cycles that exist and are being removed elsewhere. The list only shrinks: a new cycle fails the
test, and so does a listed one that is gone (delete its entry)."""


def module_names() -> dict[str, Path]:
    """Every module of the package by name; a compiled one (crawlspace.seen._minhash) by its stub."""
    names = {}
    stubs_of_compiled = [path for path in PACKAGE.rglob("*.pyi") if not path.with_suffix(".py").exists()]
    for path in [*PACKAGE.rglob("*.py"), *stubs_of_compiled]:
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports, anywhere in its source."""

    def known(target: str) -> str:
        while target not in modules:
            target = target.rpartition(".")[0]
        return target

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {known(alias.name) for alias in node.names if alias.name.split(".")[0] == "crawlspace"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up per extra dot
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            if base.split(".")[0] != "crawlspace":
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else known(base))
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(root: str) -> None:
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def floor(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_graph_sees_every_kind_of_import() -> None:
    graph = import_graph()
    assert "crawlspace.crawl.engine" in graph["crawlspace.crawl.workers"]  # lazy and TYPE_CHECKING imports
    assert "crawlspace.frontier.back" in graph["crawlspace.frontier.frontier"]
    assert "crawlspace.crawl.journal" in graph["crawlspace.crawl.ledger"]  # from crawlspace.crawl import journal
    assert "crawlspace.urls" in graph["crawlspace.crawl.links"]  # a name re-exported by a package


@pytest.mark.parametrize("lower", LOWER)
def test_lower_floors_never_import_the_engine_or_what_drives_it(lower: str) -> None:
    graph = import_graph()
    upward = {
        (name, target)
        for name, targets in graph.items()
        if floor(name) == lower
        for target in targets
        if floor(target) in UPPER
    }
    assert not upward, f"{lower}/ imports from above its floor: {sorted(upward)}"


def test_the_simulated_web_knows_nothing_of_the_crawler() -> None:
    """The web judges the crawler: it must not be built from the code it judges."""
    graph = import_graph()
    crawler = {
        (name, target)
        for name, targets in graph.items()
        if floor(name) == "simweb"
        for target in targets
        if floor(target) != "simweb"
    }
    assert not crawler, sorted(crawler)


def test_no_two_modules_import_each_other() -> None:
    found = set(cycles(import_graph()))
    new = found - KNOWN_CYCLES
    assert not new, f"import cycles: {[sorted(cycle) for cycle in new]}"
    gone = KNOWN_CYCLES - found
    assert not gone, f"these cycles are gone: delete them from KNOWN_CYCLES: {[sorted(cycle) for cycle in gone]}"


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert sorted(map(sorted, cycles(graph))) == [["a", "b", "c"], ["d", "e"]]
