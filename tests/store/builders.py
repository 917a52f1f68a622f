"""Builders of fetch results and parsed pages, so store tests need no network."""

from __future__ import annotations

import time

from crawlspace.fetch import FetchResult, Outcome
from crawlspace.fetch.body import Payload
from crawlspace.parse import Link, ParsedPage


def html_page(title: str, text: str, links: list[tuple[str, str]]) -> bytes:
    anchors = "".join(f'<a href="{href}">{anchor}</a>\n' for href, anchor in links)
    return f"<html><head><title>{title}</title></head><body><p>{text}</p>{anchors}</body></html>".encode()


def fetch_result(
    url: str,
    body: Payload = b"<html><title>t</title></html>",
    *,
    status: int = 200,
    content_type: str = "text/html; charset=utf-8",
    started: float | None = None,
    extra_headers: list[tuple[str, str]] | None = None,
) -> FetchResult:
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))] + (extra_headers or [])
    return FetchResult(
        url=url,
        outcome=Outcome.for_status(status),
        status=status,
        reason="OK" if status == 200 else "Status",
        headers=headers,
        body=body,
        address="127.0.0.1",
        started=time.time() if started is None else started,
        duration=0.012,
        request_headers=[("User-Agent", "crawlspace-test/1.0"), ("Accept", "*/*")],
    )


def parsed(title: str, text: str, links: list[tuple[str, str]]) -> ParsedPage:
    return ParsedPage(title=title, raw_text=text, links=[Link(url, anchor, False) for url, anchor in links])
