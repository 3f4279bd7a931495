"""The publish token bucket: a burst of one second's worth, then the refill rate.

(That idle buckets are dropped and their number capped is in
tests/e2e/security/test_security_limits.py.)
"""

from __future__ import annotations

import pytest

from pushserver.core.ratelimit import RateLimiter


def test_a_burst_of_one_seconds_worth_then_the_wait_for_the_next_token():
    limiter = RateLimiter(rate=4)
    assert [limiter.take("k", now=10.0) for _ in range(4)] == [0.0] * 4
    assert limiter.take("k", now=10.0) == pytest.approx(0.25)
    assert limiter.take("k", now=10.1) == pytest.approx(0.15)
    assert limiter.take("k", now=10.25) == 0.0


def test_publishers_have_buckets_of_their_own():
    limiter = RateLimiter(rate=1)
    assert limiter.take("a", now=0.0) == 0.0
    assert limiter.take("a", now=0.0) > 0
    assert limiter.take("b", now=0.0) == 0.0


def test_a_rate_under_one_still_allows_one_request():
    limiter = RateLimiter(rate=0.5)
    assert limiter.take("k", now=0.0) == 0.0
    assert limiter.take("k", now=1.0) == pytest.approx(1.0)
    assert limiter.take("k", now=2.0) == 0.0


def test_a_refused_request_takes_no_token():
    limiter = RateLimiter(rate=2)
    limiter.take("k", now=0.0)
    limiter.take("k", now=0.0)
    for _ in range(5):
        assert limiter.take("k", now=0.2) == pytest.approx(0.3)
    assert limiter.take("k", now=0.5) == 0.0
