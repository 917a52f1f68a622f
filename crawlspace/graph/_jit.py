"""The one place that compiles: numba's `njit`, cached on disk where a cache can be written.

Why numba at all is measured in `crawlspace.graph.bvformat`'s docstring. `cache=True` writes the machine code
next to the source (`__pycache__`) or, when that is read-only (a system site-packages), in the user's cache
directory; when neither can be written numba refuses the decoration itself (RuntimeError "no locator
available"), so the kernels are then compiled in memory on each first call instead: slower to start, the
same code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba

Kernel = Callable[..., Any]
"""A compiled function: numba types its arguments at the call, so to mypy it takes and returns anything."""


def jit(function: Callable[..., Any]) -> Kernel:
    try:
        compiled: Kernel = numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # no writable cache directory anywhere
        compiled = numba.njit(cache=False, nogil=True)(function)
    return compiled
