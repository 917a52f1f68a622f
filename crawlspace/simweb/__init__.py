"""The simulated web: a deterministic generator, its ground truth, and a server on loopback.

Who fills it and who drains it: `SimWeb.generate(SimWebConfig(...))` draws a web from a seed
(hosts under `.test`, heavy-tailed sites and in-degrees, every link form, every kind of
robots.txt, duplicates, redirects, errors, a spider trap) into flat numpy arrays; bodies are
never stored but rendered on demand from the arrays and a shared word corpus. `SimServer`
(or `serve_in_background`, or `crawlspace simweb serve`) answers HTTP for every host on its
own 127.R.x.y address and logs every request; tests then judge a crawl from the server's
side with the ground truth (`expected_fetches`, `robots_allowed`, `duplicate_cluster`, ...),
or all at once with `judge_crawl(web, read_log(path), seeds)`.

Invariants: the same config gives the same web in any process (the server subprocess
regenerates it and checks `fingerprint()`); the ground truth is computed from the arrays and
hand-written robots rules, never by parsing what the renderer wrote.
"""

from crawlspace.simweb.config import SimWebConfig, SimWebConfigError
from crawlspace.simweb.export import export_static
from crawlspace.simweb.generator import SimWeb
from crawlspace.simweb.judge import CrawlVerdict, judge_crawl
from crawlspace.simweb.model import Link, Response
from crawlspace.simweb.robots import RobotsKind
from crawlspace.simweb.server import (
    LogEntry,
    RunningServer,
    SimServer,
    read_log,
    read_nginx_log,
    serve_in_background,
)

__all__ = [
    "CrawlVerdict",
    "Link",
    "LogEntry",
    "Response",
    "RobotsKind",
    "RunningServer",
    "SimServer",
    "SimWeb",
    "SimWebConfig",
    "SimWebConfigError",
    "export_static",
    "judge_crawl",
    "read_log",
    "read_nginx_log",
    "serve_in_background",
]
