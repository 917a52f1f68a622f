"""Text from a crawl shown to a person: it is hostile input (a URL or title can carry terminal escapes).

One function, imported by every command that prints crawl data (`rank`, `search`, `graph`, the demo); it lives
here, on no floor, so that a command need not import the module that found the text (the jobs load Dask).
"""

from __future__ import annotations


def printable(text: str) -> str:
    """Control and other unprintable characters as \\x and their code point in hex, the rest as it is."""
    return "".join(char if char.isprintable() else f"\\x{ord(char):02x}" for char in text)
