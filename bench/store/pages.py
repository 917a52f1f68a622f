"""Synthetic crawled pages for the store benchmarks: HTML of a chosen size with Zipf-distributed words.

The words follow Zipf's law over a pronounceable vocabulary (as the simulated web's do), so that
gzip and zstd see text that compresses like real prose, not random bytes or one repeated string.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

_ONSETS = ("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "br", "ch", "st", "th", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou")
_CODAS = ("", "", "n", "r", "s", "t", "l", "nd", "st", "ck")
_COMMON = [
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "it",
    "you",
    "that",
    "he",
    "was",
    "for",
    "on",
    "are",
    "with",
    "as",
    "his",
    "they",
    "be",
    "at",
    "one",
    "have",
    "this",
    "from",
    "or",
]


@dataclass(slots=True)
class SyntheticPage:
    url: str
    html: bytes
    title: str
    text: str
    links: list[tuple[str, str]] = field(default_factory=list)


class PageFactory:
    def __init__(self, *, seed: int = 7, hosts: int = 200, pages_per_host: int = 500, vocabulary: int = 6000) -> None:
        self.random = random.Random(seed)
        words = list(_COMMON)
        seen = set(words)
        while len(words) < vocabulary:
            word = "".join(
                self.random.choice(_ONSETS) + self.random.choice(_VOWELS) + self.random.choice(_CODAS)
                for _ in range(1 + (self.random.random() > 0.45) + (self.random.random() > 0.85))
            )
            if word not in seen:
                seen.add(word)
                words.append(word)
        self.words = words
        weights = [1.0 / rank**1.05 for rank in range(1, vocabulary + 1)]
        self.cumulative: list[float] = []
        total = 0.0
        for weight in weights:
            total += weight
            self.cumulative.append(total)
        self.hosts = hosts
        self.pages_per_host = pages_per_host

    def url(self, host: int, page: int) -> str:
        return f"http://www.site{host}.example.com/articles/{page // 50}/page-{page}.html"

    def random_url(self) -> str:
        return self.url(self.random.randrange(self.hosts), self.random.randrange(self.pages_per_host))

    def _words(self, count: int) -> list[str]:
        return self.random.choices(self.words, cum_weights=self.cumulative, k=count)

    def page(self, url: str, *, size: int = 25_000, links: int = 20) -> SyntheticPage:
        title = " ".join(self._words(6)).capitalize()
        outlinks = [(self.random_url(), " ".join(self._words(self.random.randint(1, 4)))) for _ in range(links)]
        nav = "".join(f'<li><a href="{href}">{text}</a></li>\n' for href, text in outlinks)
        head = (
            f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>{title}</title>"
            f'<link rel=stylesheet href="/style.css"></head>\n<body><header><h1>{title}</h1></header>\n'
            f"<nav><ul>\n{nav}</ul></nav>\n<main>\n"
        )
        tail = "</main><footer>Generated page</footer></body></html>\n"
        paragraphs: list[str] = []
        budget = size - len(head) - len(tail)
        used = 0
        while used < budget:
            sentence_words = self._words(self.random.randint(6, 18))
            paragraph = " ".join(sentence_words).capitalize() + ". " + " ".join(self._words(60)) + "."
            paragraphs.append(paragraph)
            used += len(paragraph) + 8
        body = "".join(f"<p>{paragraph}</p>\n" for paragraph in paragraphs)
        html = (head + body + tail).encode()[:size]
        text = title + "\n" + "\n".join(paragraphs)
        return SyntheticPage(url=url, html=html, title=title, text=text, links=outlinks)

    def pages(self, count: int, *, size: int = 25_000, links: int = 20) -> list[SyntheticPage]:
        return [self.page(self.url(i % self.hosts, i // self.hosts), size=size, links=links) for i in range(count)]
