"""Crawl processes are forked unless a thread of the package runs beside them (then: a fork server)."""

from __future__ import annotations

import threading

from crawlspace.crawl.workers import THREAD_PREFIX, start_method


def _with_thread(name: str) -> str:
    release = threading.Event()
    other = threading.Thread(target=release.wait, name=name, daemon=True)
    other.start()
    try:
        return start_method()
    finally:
        release.set()
        other.join()


def test_a_thread_of_the_package_means_a_fork_server() -> None:
    assert _with_thread(f"{THREAD_PREFIX}dashboard") == "forkserver"


def test_another_thread_leaves_the_choice_to_the_table_s_threads() -> None:
    assert _with_thread("someone-else") == start_method()
