"""The long-poll size rule and the backoff's progress rule, as protocol.md states them."""

from __future__ import annotations

from pushclient.backoff import Backoff, Retries
from pushclient.pollsize import PollLimit


def test_limit_halves_on_cut_bodies_down_to_one_and_doubles_back_to_the_cap():
    limit = PollLimit(100)
    assert limit.value == 100
    seen = []
    for _ in range(8):
        limit.cut_short()
        seen.append(limit.value)
    assert seen == [50, 25, 12, 6, 3, 1, 1, 1]
    seen = []
    for _ in range(8):
        limit.arrived()
        seen.append(limit.value)
    assert seen == [2, 4, 8, 16, 32, 64, 100, 100]


def test_a_lower_cap_learned_later_bounds_the_limit():
    limit = PollLimit()
    limit.set_cap(10)
    assert limit.value == 10
    limit.arrived()
    assert limit.value == 10
    limit.set_cap(0)
    assert (limit.cap, limit.value) == (1, 1)


def test_an_attempt_that_made_progress_starts_the_backoff_again():
    retries = Retries(Backoff(initial=0.25, maximum=30.0, jitter=0.0))
    assert [retries.failed() for _ in range(4)] == [0.25, 0.5, 1.0, 2.0]
    retries.progress()  # the next attempt's answer began, then it dropped
    assert retries.failed() == 0.25
    assert retries.failures == 1
    retries.progress()
    assert retries.failed(retry_after=5.0) == 5.0
