"""The web dashboard: a crawl's live figures, its hosts and pages, search, controls and Prometheus metrics.

Who fills it: nothing here writes a crawl. `view.CrawlView` reads what a crawl leaves in its
directory anyway (progress.jsonl, stats.json, and the table, WARC files and robots.txt log through
`CrawlReader`), so one dashboard serves a finished crawl, a crawl running in another process, or
(`crawl --serve`) the crawl of its own process, all alike. Who drains it: `app.py` renders pages and
the JSON API from the view (Jinja2, autoescaped: everything from the web is hostile), `metrics.py`
exports /metrics, `security.py` decides who may see and who may control, `server.py` runs it;
`hosttable.py` sorts, filters and pages the hosts table, which has a row for each of a crawl's hosts.

The one thing it writes is an operator's command (pause, resume, stop) into DIR/control.json,
which the crawl's engines poll (crawl/control.py): POST only, with the CSRF token of the pages and,
off loopback, the access token.
"""
