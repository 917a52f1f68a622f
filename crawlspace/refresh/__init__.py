"""Continuous crawling: coming back to each page as often as its changes and its quality deserve.

Who fills it and who drains it (the parts built so far): every refetch of a page adds one
observation (`estimate.Observation`: the interval, changed or not, the age of the change when the
server's Last-Modified is plausible) to the page's bounded `ChangeHistory`; `estimate.estimate_rate`
turns it into a Poisson change rate (Cho & Garcia-Molina's bias-reduced estimator, generalized to
the irregular intervals a polite crawler has), borrowing its cluster's rate while the history is
short; a `policies.RefreshPolicy` turns the rates, the pages' weights (quality) and the crawl's fetch
budget into a refetch frequency per page (uniform, proportional, or the freshness-optimal
allocation); `schedule.RefreshSchedule` keeps every page's next due time on disk and hands out the
due ones, in due order, to the frontier's front queues.

Invariants: an estimate is finite and >= 0 for any history; a policy never spends more than its
budget (bounds aside); the schedule holds each URL at most once, and a URL taken from it is gone
only once the caller commits (a kill -9 between the two loses nothing).
"""
