"""`crawlspace index` and `crawlspace search`: build or update a crawl's search index, and query it.

`index` is a front over the batch jobs' index job (`crawlspace.jobs.index`, with the jobs it reads
run first when they have no output yet); `search` opens DIR/jobs/index (`crawlspace.index.Index`)
and shows each result with a snippet read through the crawl reader.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from crawlspace.cliutil import fail, open_reader

__all__ = ["index_command", "search_command", "tier_cutoff_option"]

tier_cutoff_option = click.option(
    "--tier-cutoff",
    type=click.FloatRange(0, min_open=True),
    default=None,
    help="Tier 1: pages of PageRank at least this many times the average, the rest in tier 2 (default: one tier).",
)
"""Shared with `crawlspace jobs`, which runs the index job too."""


def _crawl_directory(directory: Path) -> Path:
    if not directory.is_dir():
        fail(f"no crawl directory {directory}")
    return directory


@click.command(name="index")
@click.argument("directories", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--shards", type=click.IntRange(1, 4096), default=4, show_default=True, help="Shards (by URL).")
@click.option(
    "--scheduler",
    default="synchronous",
    show_default=True,
    help="synchronous or threads (in this process), or a Dask scheduler address tcp://HOST:8786.",
)
@click.option("--out", type=click.Path(path_type=Path), help="Where jobs/ is written (default: the first directory).")
@click.option("--partitions", type=click.IntRange(1, 100_000), default=None, help="Key ranges of the crawl table.")
@tier_cutoff_option
@click.option("--rebuild", is_flag=True, help="Write every page again instead of adding segments to the last index.")
@click.option(
    "--merge", is_flag=True, help="Merge each shard's segments into as few as hold its pages, dropping masked ones."
)
def index_command(
    directories: tuple[Path, ...],
    shards: int,
    scheduler: str,
    out: Path | None,
    partitions: int | None,
    tier_cutoff: float | None,
    rebuild: bool,
    merge: bool,
) -> None:
    """Build the search index of the crawl in DIRECTORIES (DIR/jobs/index), or update it: pages new or
    changed since the last run go into new segments, their old copies and pages gone are masked, and
    segments are merged by size (Lucene's tiered policy); --merge merges all it can."""
    from crawlspace.jobs import JobError, JobOutputError, run
    from crawlspace.store import CrawlTableError

    for directory in directories:
        _crawl_directory(directory)
    try:
        summaries = run(
            list(directories),
            only=["index"],
            scheduler=scheduler,
            out=out,
            partitions=partitions or 0,
            options={"index": {"shards": shards, "tier_cutoff": tier_cutoff, "rebuild": rebuild, "merge": merge}},
            progress=lambda line: click.echo(f"crawlspace: {line}", err=True),
        )
    except (JobError, JobOutputError, CrawlTableError, ValueError, OSError) as exc:
        fail(str(exc))
    click.echo(json.dumps(summaries, indent=2, ensure_ascii=False))


@click.command(name="search")
@click.argument("directory", type=click.Path(path_type=Path))
@click.argument("query")
@click.option("-k", "top", type=click.IntRange(1, 10_000), default=10, show_default=True, help="Results to show.")
@click.option("--json", "as_json", is_flag=True, help="Print a list of {url, score, title, snippet} in rank order.")
@click.option("--explain", is_flag=True, help="Break each score into its terms' BM25F parts per field and the prior.")
@click.option("--all", "show_all", is_flag=True, help="Show near-duplicates too (default: the best of each cluster).")
@click.option("--all-tiers", is_flag=True, help="Rank every tier's pages together (default: tier 2 only to fill k).")
def search_command(
    directory: Path, query: str, top: int, as_json: bool, explain: bool, show_all: bool, all_tiers: bool
) -> None:
    """Search the index that `crawlspace index` built (DIR/jobs/index): words (all of them), "a phrase",
    -excluded, site:host, a OR b. Each result shows the passage of its page where the terms are."""
    from crawlspace.index import Index, IndexFormatError, parse_query
    from crawlspace.index.segment import FIELDS
    from crawlspace.index.snippets import Snippet, make_snippet
    from crawlspace.jobs.lookup import printable

    parsed = parse_query(query)
    try:
        with Index(_crawl_directory(directory) / "jobs" / "index") as index:
            result = index.search(parsed, top, collapse=not show_all, tiers=not all_tiers)
            idf = {term: index.scorer.idf(index.stats.document_frequency(term)) for term in parsed.terms}
            explained = [index.explain(hit, parsed) for hit in result.hits] if explain else []
    except IndexFormatError as exc:
        fail(f"{exc} (build it with `crawlspace index {directory}`)")
    snippets: list[Snippet] = []
    with open_reader(directory) as reader:
        for hit in result.hits:
            page = reader.page(hit.url)
            text = (page.text or "") if page is not None else ""
            if page is not None and not text:
                reparsed = reader.parse(page)
                text = reparsed.text if reparsed is not None else ""
            snippets.append(make_snippet(text, parsed.terms, weights=idf))
    if as_json:
        rows = [
            {"url": hit.url, "score": hit.score, "title": hit.title, "snippet": snippet.text, "similar": hit.similar}
            for hit, snippet in zip(result.hits, snippets, strict=True)
        ]
        click.echo(json.dumps(rows, ensure_ascii=False))
        return
    for rank, (hit, snippet) in enumerate(zip(result.hits, snippets, strict=True), 1):
        similar = f"  ({hit.similar} similar page{'s' if hit.similar > 1 else ''})" if hit.similar else ""
        click.echo(f"{rank:>3} {hit.score:8.4f}  {printable(hit.url)}{similar}")
        if hit.title:
            click.echo(f"{'':>14}{printable(hit.title)}")
        if snippet.text:
            parts, at = [], 0
            for start, end in snippet.highlights:  # each piece escaped, then the terms set in bold
                parts += [printable(snippet.text[at:start]), click.style(printable(snippet.text[start:end]), bold=True)]
                at = end
            parts.append(printable(snippet.text[at:]))
            click.echo(f"{'':>14}{''.join(parts)}")
        if explain:
            for part in explained[rank - 1].terms:
                by_field = ", ".join(
                    f"{name} {share:.4f} (tf {tf})"
                    for name, share, tf in zip(FIELDS, part.fields, part.freqs, strict=True)
                )
                formula = f"idf {part.idf:.3f} x saturated tfn {part.tfn:.3f}"
                click.echo(f"{'':>14}{printable(part.term)}: {part.score:.4f} = {formula}; {by_field}")
            click.echo(f"{'':>14}PageRank prior: {explained[rank - 1].prior:.4f}")
    if explain:
        counters = result.counters
        click.echo(
            f"postings scored: {counters.postings_scored} of {counters.postings_total};"
            f" blocks decoded: {counters.blocks_decoded} of {counters.blocks_total};"
            f" tiers searched: {result.tiers_searched} of {result.tiers}",
            err=True,
        )
    if not result.hits:
        click.echo("no results", err=True)
