"""How busy a client process was while it read one message's answers
(`pushserver_bench.runnable`): the share of a read window it ran or waited for a core."""

from __future__ import annotations

import pytest

from pushserver_bench.runnable import (
    MIN_WINDOW,
    SAMPLE_EVERY,
    Runnable,
    busiest_window,
    share,
)

TIMES = [10.0, 10.1, 10.2, 10.3, 10.4]
RUNNABLE = [1.0, 1.05, 1.15, 1.25, 1.26]  # runnable seconds so far at each sample


def test_the_share_is_taken_between_the_samples_inside_the_window() -> None:
    assert share(TIMES, RUNNABLE, 10.1, 10.3) == pytest.approx(1.0)  # 0.2 s runnable in 0.2 s
    assert share(TIMES, RUNNABLE, 9.0, 11.0) == pytest.approx(0.65)  # 0.26 s in 0.4 s
    assert share(TIMES, RUNNABLE, 10.05, 10.25) == pytest.approx(1.0)  # samples 10.1 and 10.2


def test_a_window_with_too_few_samples_or_too_short_is_not_judged() -> None:
    assert share(TIMES, RUNNABLE, 10.15, 10.25) is None  # one sample inside
    assert share([], [], 0.0, 1.0) is None
    close = [10.0, 10.0 + MIN_WINDOW / 2]
    assert share(close, [1.0, 1.01], 9.0, 11.0) is None


def test_the_busiest_window_names_its_message() -> None:
    spans = {100.0: [10.0, 10.1], 100.5: [10.1, 10.3], 101.0: [10.35, 10.36]}
    best, sent = busiest_window(TIMES, RUNNABLE, spans)
    assert (best, sent) == (pytest.approx(1.0), 100.5)
    assert busiest_window(TIMES, RUNNABLE, {101.0: [10.35, 10.36]}) == (0.0, 0.0)


def test_this_process_is_sampled_every_so_many_deliveries() -> None:
    runnable = Runnable()
    try:
        runnable.counted(SAMPLE_EVERY - 1)
        assert len(runnable.times) == 0
        runnable.counted(1)
        runnable.counted(SAMPLE_EVERY * 3)  # one read of many counts once
        assert len(runnable.times) == len(runnable.runnable) == 2
        runnable.sample()
        assert list(runnable.times) == sorted(runnable.times)
        assert list(runnable.runnable) == sorted(runnable.runnable)
        assert runnable.runnable[0] > 0  # this process has run
    finally:
        runnable.close()
