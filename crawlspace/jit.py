"""The one place that compiles: numba's `njit`, cached on disk where a cache can be written.

Shared by the connectivity server's codes and the search engine's top-k kernel; why numba at all is measured
in `crawlspace.graph.bvformat`'s and `crawlspace.index.topk`'s docstrings. `cache=True` writes the machine code
next to the source (`__pycache__`) or, when that is read-only (a system site-packages), in the user's cache
directory; when neither can be written numba refuses the decoration itself (RuntimeError "no locator
available"), so the kernels are then compiled in memory on each first call instead: slower to start, the
same code. A cache directory that was writable when probed can still fail when numba saves into it (a full
disk): numba lets that OSError out of the call that compiled, so the save is guarded here and the compiled
code is used from memory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numba

logger = logging.getLogger(__name__)

Kernel = Callable[..., Any]
"""A compiled function: numba types its arguments at the call, so to mypy it takes and returns anything."""


def jit(function: Callable[..., Any]) -> Kernel:
    try:
        compiled: Kernel = numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # no writable cache directory anywhere
        return numba.njit(cache=False, nogil=True)(function)
    cache = getattr(compiled, "_cache", None)  # numba's per-dispatcher cache (a private attribute)
    save = getattr(cache, "save_overload", None)
    if save is not None:

        def save_or_keep_in_memory(signature: Any, data: Any) -> None:
            try:
                save(signature, data)
            except OSError as error:
                logger.warning("numba could not cache %s (%s); it runs compiled from memory", function.__name__, error)

        cache.save_overload = save_or_keep_in_memory  # type: ignore[union-attr]
    return compiled
