"""Making a rename or a new file survive a power loss: the directory entry itself must be fsynced, which
Python has no call for. One helper for every store that commits by rename (checkpoints, the frontier's
segments, the batch jobs' outputs)."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_directory(path: Path) -> None:
    """fsync the directory `path`, so that the entries created or renamed in it are on disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
