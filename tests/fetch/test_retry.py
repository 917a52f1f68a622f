"""Retry decisions: transient failures retried a bounded number of times with growing rests,
Retry-After honoured for the host, permanent answers never retried."""

from __future__ import annotations

import pytest

from crawlspace.fetch import FetchResult, Outcome
from crawlspace.fetch.retry import RetryPolicy


def result(outcome: Outcome, status: int = 0, retry_after: str | None = None) -> FetchResult:
    headers = [("Retry-After", retry_after)] if retry_after else []
    return FetchResult("http://x.test/", outcome, status, headers=headers)


POLICY = RetryPolicy(max_retries=3, initial_delay=10.0, max_delay=600.0, statuses=frozenset({500, 502, 408}))


@pytest.mark.parametrize(
    "failed",
    [
        result(Outcome.TIMEOUT),
        result(Outcome.CONNECTION_RESET),
        result(Outcome.CONNECTION_REFUSED),
        result(Outcome.SERVER_ERROR, 500),  # configured
        result(Outcome.SERVER_ERROR, 502),
        result(Outcome.CLIENT_ERROR, 408),
        result(Outcome.TIMEOUT, 200),  # the body timed out after the head came
    ],
)
def test_transient_failures_are_retried_with_doubling_rests(failed: FetchResult) -> None:
    decisions = [POLICY.decide(failed, attempts) for attempts in (1, 2, 3, 4)]
    assert [d.retry for d in decisions] == [True, True, True, False]
    assert [d.delay for d in decisions[:3]] == [10.0, 20.0, 40.0]
    assert "gave up after 4 attempts" in decisions[3].reason


def test_statuses_are_answers_unless_configured() -> None:
    default = RetryPolicy()
    for status in (500, 502, 503, 504, 429):
        outcome = Outcome.SERVER_ERROR if status >= 500 else Outcome.CLIENT_ERROR
        assert not default.decide(result(outcome, status), 1).retry, status


@pytest.mark.parametrize(
    "final",
    [
        result(Outcome.OK, 200),
        result(Outcome.CLIENT_ERROR, 404),
        result(Outcome.CLIENT_ERROR, 403),
        result(Outcome.REDIRECT, 301),
        result(Outcome.BAD_RESPONSE),
        result(Outcome.TOO_LARGE, 200),
        result(Outcome.TLS_ERROR),
        result(Outcome.GUARD_REFUSED),
        result(Outcome.DNS_ERROR),  # DNS has its own backoff in the resolver
        result(Outcome.SERVER_ERROR, 504),  # not configured
    ],
)
def test_permanent_outcomes_are_not_retried(final: FetchResult) -> None:
    decision = POLICY.decide(final, 1)
    assert not decision.retry and decision.delay is None


def test_retry_after_slows_the_host_and_outranks_the_backoff() -> None:
    decision = POLICY.decide(result(Outcome.SERVER_ERROR, 503, "120"), 1)
    assert decision.retry and decision.delay == 120.0
    decision = POLICY.decide(result(Outcome.CLIENT_ERROR, 429, "2"), 2)
    assert decision.retry and decision.delay == 20.0  # backoff is longer
    exhausted = POLICY.decide(result(Outcome.CLIENT_ERROR, 429, "300"), 4)
    assert not exhausted.retry and exhausted.delay == 300.0  # the host still rests as asked


def test_retry_after_is_capped() -> None:
    assert POLICY.decide(result(Outcome.SERVER_ERROR, 503, "86400"), 1).delay == 600.0


def test_backoff_is_capped() -> None:
    assert RetryPolicy(initial_delay=100, max_delay=300).backoff(10) == 300.0


def test_no_retries_configured() -> None:
    assert not RetryPolicy(max_retries=0).decide(result(Outcome.TIMEOUT), 1).retry
