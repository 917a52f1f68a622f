"""Processors that must not run on the event loop: CPU-heavy ones in worker processes, blocking ones in threads.

`run_in_process(processor)` returns an async processor that sends each page to a pool of worker
processes and awaits the result, so the fetchers go on while the workers compute (and a second
core is used at all: the crawler's own work is one thread). The processor and the page are
pickled for each call: pass a module-level function, or an object whose state is small; load
big state (a model) lazily inside the worker. Workers are started with `spawn` by default (a
fresh interpreter, nothing of the crawler's sockets, threads or event loop inherited), so the
processor must be importable: defined in a module, or in a script guarded by
`if __name__ == "__main__":`. Items and Follows travel back pickled; exceptions too, with the
worker's traceback.

`run_in_thread(processor)` does the same with threads, for blocking I/O (a synchronous database
client, a filesystem walk); threads share the GIL, so it does not help CPU-bound work.
"""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing
from collections.abc import AsyncIterable, Awaitable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from crawlspace.hooks.protocols import Page, PageProcessor, as_outputs, hook_name


def call_to_completion(processor: PageProcessor, page: Page) -> list[object]:
    """Run a processor of any form to the end, outside an event loop; its output as a list."""
    result = processor(page)
    if isinstance(result, AsyncIterable):
        return asyncio.run(_collect(result))
    if inspect.isawaitable(result):
        result = asyncio.run(_await(result))
    return list(as_outputs(result))


async def _collect(results: AsyncIterable[object]) -> list[object]:
    return [result async for result in results]


async def _await(result: Awaitable[Any]) -> Any:
    return await result


class _PooledProcessor:
    """An async processor that runs `processor` in an executor created on first use."""

    kind = "pool"

    def __init__(self, processor: PageProcessor, workers: int | None) -> None:
        self.processor = processor
        self.name = hook_name(processor)
        self.workers = workers
        self._executor: Executor | None = None

    def _make_executor(self) -> Executor:
        raise NotImplementedError

    async def __call__(self, page: Page) -> list[object]:
        if self._executor is None:
            self._executor = self._make_executor()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, call_to_completion, self.processor, page)

    def close(self) -> None:
        """Wait for the workers to finish what they hold, then stop them."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        close = getattr(self.processor, "close", None)
        if callable(close):
            close()

    def __repr__(self) -> str:
        state = "running" if self._executor is not None else "idle"
        return f"{type(self).__name__}({self.name}, workers={self.workers}, {state})"


class ProcessPoolProcessor(_PooledProcessor):
    kind = "process"

    def __init__(self, processor: PageProcessor, workers: int | None, start_method: str) -> None:
        super().__init__(processor, workers)
        self.start_method = start_method

    def _make_executor(self) -> Executor:
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context(self.start_method))


class ThreadPoolProcessor(_PooledProcessor):
    kind = "thread"

    def _make_executor(self) -> Executor:
        return ThreadPoolExecutor(self.workers, thread_name_prefix=f"crawlspace-{self.name}")


def run_in_process(
    processor: PageProcessor, *, workers: int | None = None, start_method: str = "spawn"
) -> ProcessPoolProcessor:
    """`processor` run in `workers` processes (default: one per CPU); see the module docstring."""
    if workers is not None and workers < 1:
        raise ValueError("workers must be at least 1")
    return ProcessPoolProcessor(processor, workers, start_method)


def run_in_thread(processor: PageProcessor, *, workers: int = 4) -> ThreadPoolProcessor:
    """`processor` run in a pool of `workers` threads; see the module docstring."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    return ThreadPoolProcessor(processor, workers)
