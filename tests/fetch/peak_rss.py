"""Run a crawl through the CLI in a child process and measure its peak resident memory from outside.

The peak is the kernel's: `ru_maxrss` of the reaped child (os.wait4), the high-water mark of its
resident set over its whole life, crawl processes it forked included (the largest of them). Nothing
inside the crawl is asked, so the figure cannot be flattered by what the crawl reports of itself.

The crawl is started by a small launcher process, not by the test's own: Linux keeps a process's
`ru_maxrss` across execve, and a child made by vfork/fork+exec starts with its parent's resident set as
its high-water mark, so a crawl started straight from a pytest worker that had grown to 400 MB (after
other tests) "peaked" at 400 MB whatever it did itself. The launcher is some 10 MB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class MeasuredCrawl:
    peak_rss_mb: float
    returncode: int
    seconds: float
    stderr: str


def loopback_config(hosts: list[str], **overrides: object) -> dict[str, object]:
    """A crawl of `hosts`, all on 127.0.0.1, as fast as the server answers: nothing but the pages' own
    size and number decides what the crawl holds (the memory test and bench/memory use it)."""
    config: dict[str, object] = {
        "processes": 1,
        "concurrency": 64,
        "per_ip": False,  # every host is 127.0.0.1: each gets its own connection
        "min_delay": 0.0,
        "delay_factor": 0.0,
        "max_retries": 0,
        "max_depth": 0,
        "allow_networks": ["127.0.0.1/32"],
        "resolve": {host: "127.0.0.1" for host in hosts},
    }
    config.update(overrides)
    return config


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_value(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


_LAUNCHER = """
import json, os, subprocess, sys, time
command, timeout = json.loads(sys.argv[1]), float(sys.argv[2])
child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
deadline = time.monotonic() + timeout
while True:
    pid, status, usage = os.wait4(child.pid, os.WNOHANG)
    if pid:
        break
    if time.monotonic() > deadline:
        child.kill()
        pid, status, usage = os.wait4(child.pid, 0)
        break
    time.sleep(0.05)
print(json.dumps([os.waitstatus_to_exitcode(status), usage.ru_maxrss]))
"""


def crawl_measured(seeds: list[str], out: Path, config: dict[str, object], timeout: float = 300) -> MeasuredCrawl:
    """`crawlspace crawl` of `seeds` into `out` with `config` (keys of CrawlConfig), in a child process."""
    out.parent.mkdir(parents=True, exist_ok=True)
    seeds_file = out.parent / f"{out.name}-seeds.txt"
    seeds_file.write_text("".join(f"{url}\n" for url in seeds))
    config_file = out.parent / f"{out.name}-config.toml"
    config_file.write_text("".join(f"{key} = {toml_value(value)}\n" for key, value in config.items()))
    command = [sys.executable, "-m", "crawlspace", "crawl", str(seeds_file), "--out", str(out)]
    command += ["--config", str(config_file), "--no-progress"]
    started = time.monotonic()
    stderr_file = out.parent / f"{out.name}-stderr.txt"
    with open(stderr_file, "wb") as stderr:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        launched = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, json.dumps(command), str(timeout)],
            stdout=subprocess.PIPE, stderr=stderr, env=env, check=True,
        )  # fmt: skip
    returncode, max_rss_kib = json.loads(launched.stdout)
    return MeasuredCrawl(
        peak_rss_mb=max_rss_kib / 1024,  # KiB on Linux
        returncode=returncode,
        seconds=time.monotonic() - started,
        stderr=stderr_file.read_text(errors="replace"),
    )
