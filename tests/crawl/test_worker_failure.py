"""A crawl process that dies before it is ready (an error no startup check foresaw) ends the crawl
with an error naming it, instead of the others waiting for it for ever: the hang a resumed crawl
showed when one partition's first checkpoint raised."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import crawlspace.crawl.engine as engine_module
    from crawlspace.config import CrawlConfig
    from crawlspace.crawl.workers import ParallelCrawl, WorkerStartupError

    class FailingEngine(engine_module.CrawlEngine):
        def __init__(self, config, out_dir, **options):
            if Path(out_dir).name == "1":
                raise KeyError(2)  # as the socket mesh did, sending before it had channels
            super().__init__(config, out_dir, **options)

    engine_module.CrawlEngine = FailingEngine  # the forked workers import it from here
    out = Path(sys.argv[1])
    crawl = ParallelCrawl(
        CrawlConfig(allow_private_addresses=True), out, ["http://127.0.0.1:9/"], processes=2, resume=False, live=False
    )
    try:
        crawl.run()
    except WorkerStartupError as exc:
        print("refused:", exc)
    """
)


def test_a_worker_that_dies_before_it_is_ready_ends_the_crawl_with_its_name(tmp_path: Path) -> None:
    script = tmp_path / "crawl.py"
    script.write_text(SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "crawl")],
        capture_output=True, text=True, timeout=120, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "refused: crawl process 1 ended before it was ready (exit code 1)" in result.stdout, result.stdout
    assert "KeyError: 2" in result.stderr  # the error itself, from the process that had it
