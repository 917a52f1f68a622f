"""The graph kernels work where numba can write no cache: a read-only site-packages and a read-only home."""

from __future__ import annotations

import errno
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crawlspace.jit import jit

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import numpy as np
    import crawlspace.graph
    from crawlspace.graph import BVGraph, CsrGraph, decode, write_bvgraph

    assert crawlspace.graph.__file__.startswith(sys.argv[1]), crawlspace.graph.__file__
    graph = CsrGraph.from_lists([[1, 2, 3, 4, 5], [0, 2, 3, 4, 5], [], [2], [0, 1, 2, 3, 4, 5]] * 20)
    write_bvgraph(Path(sys.argv[2]) / "g", graph)
    loaded = BVGraph.load(Path(sys.argv[2]) / "g")
    assert loaded.to_csr() == graph
    assert loaded.successors(6).tolist() == [0, 2, 3, 4, 5]
    print(type(decode.decode_all._cache).__name__)
    """
)


@pytest.mark.slow
def test_the_kernels_compile_in_memory_when_no_cache_can_be_written(tmp_path: Path) -> None:
    installed = tmp_path / "site-packages"
    shutil.copytree(REPO / "crawlspace", installed / "crawlspace", ignore=shutil.ignore_patterns("__pycache__"))
    # numba looks for a cache beside the source, then in the user's cache directory; make both unusable. (A
    # regular file where a directory must go fails numba's probe the way a read-only directory does, also for
    # root, for whom permissions do not stop a write.)
    for package in (installed / "crawlspace").rglob("__init__.py"):
        (package.parent / "__pycache__").write_text("not a directory")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".cache").write_text("not a directory")
    for path in [installed, *installed.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    output = tmp_path / "output"
    output.mkdir()
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("NUMBA_", "XDG_", "PYTHON"))}
    environment.update(HOME=str(home), PYTHONPATH=str(installed), PYTHONDONTWRITEBYTECODE="1")
    try:
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(installed), str(output)],
            capture_output=True, text=True, timeout=240, env=environment, cwd=tmp_path,
        )  # fmt: skip
    finally:
        for path in [installed, *installed.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "NullCache"  # compiled without a cache, not written somewhere unexpected
    assert not list(home.rglob("*.nbi"))


def test_a_cache_that_fails_when_saving_leaves_the_code_compiled_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A disk that fills up between numba's probe of the cache directory and its save into it."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "kernel_source.py"
    source.write_text("def add_one(value):\n    return value + 1\n")
    spec = importlib.util.spec_from_file_location("kernel_source", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = jit(module.add_one)

    def disk_full() -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    kernel._cache._impl.locator.ensure_cache_path = disk_full  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING):
        assert kernel(41) == 42
    assert "could not cache add_one" in caplog.text
    assert not list((tmp_path / "cache").rglob("*.nbc"))
