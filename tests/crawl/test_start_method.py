"""Crawl processes are forked only from a process with no other thread (else from a fork server)."""

from __future__ import annotations

import threading

from crawlspace.crawl.workers import start_method


def test_a_thread_of_the_application_means_a_fork_server() -> None:
    release = threading.Event()
    other = threading.Thread(target=release.wait, daemon=True)
    other.start()
    try:
        assert start_method() == "forkserver"
    finally:
        release.set()
        other.join()
