"""Coalescer: publishes waiting while a call is under way share the next call."""

from __future__ import annotations

import asyncio

import pytest

from pushserver.broker.redis.coalesce import MAX_ITEMS, Coalescer


class Calls:
    """A call that records what it carried and holds until released (no timing involved)."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.batches: list[list[int]] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.fail = fail

    async def __call__(self, items: list[int]) -> list[int]:
        self.batches.append(items)
        self.started.set()
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return [item * 10 for item in items]


async def test_a_lone_submit_is_one_call_with_its_own_results() -> None:
    calls = Calls()
    calls.release.set()
    assert await Coalescer(calls).submit([1, 2]) == [10, 20]
    assert calls.batches == [[1, 2]]


async def test_submits_waiting_during_a_call_share_the_next_and_get_their_own_results() -> None:
    calls = Calls()
    coalescer = Coalescer(calls)
    first = asyncio.create_task(coalescer.submit([1]))
    await calls.started.wait()
    rest = [asyncio.create_task(coalescer.submit(items)) for items in ([2, 3], [4], [5, 6, 7])]
    calls.release.set()  # the loop runs the queued submits before the call's wake-up
    assert await first == [10]
    assert [await task for task in rest] == [[20, 30], [40], [50, 60, 70]]
    assert calls.batches == [[1], [2, 3, 4, 5, 6, 7]]


async def test_a_failed_call_fails_each_of_its_submitters_and_the_next_call_runs() -> None:
    calls = Calls(fail=ConnectionError("gone"))
    coalescer = Coalescer(calls)
    tasks = [asyncio.create_task(coalescer.submit([n])) for n in (1, 2)]
    calls.release.set()
    for task in tasks:
        with pytest.raises(ConnectionError):
            await task
    calls.fail = None
    assert await coalescer.submit([3]) == [30]
    assert calls.batches == [[1, 2], [3]]


async def test_a_cancelled_submitter_leaves_the_shared_call_to_the_others() -> None:
    calls = Calls()
    coalescer = Coalescer(calls)
    leaving = asyncio.create_task(coalescer.submit([1]))
    staying = asyncio.create_task(coalescer.submit([2]))
    await calls.started.wait()
    leaving.cancel()
    calls.release.set()
    assert await staying == [20]
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert calls.batches == [[1, 2]]


async def test_a_call_carries_at_most_max_items_but_never_splits_a_submit() -> None:
    calls = Calls()
    calls.release.set()
    coalescer = Coalescer(calls)
    sizes = [MAX_ITEMS - 1, 2, MAX_ITEMS + 5, 1]
    tasks = [asyncio.create_task(coalescer.submit(list(range(n)))) for n in sizes]
    results = [await task for task in tasks]
    assert [len(r) for r in results] == sizes
    assert [len(b) for b in calls.batches] == [MAX_ITEMS - 1, 2, MAX_ITEMS + 5, 1]


async def test_a_cancelled_call_cancels_its_submitters_and_those_waiting() -> None:
    calls = Calls(fail=asyncio.CancelledError())
    coalescer = Coalescer(calls)
    first = asyncio.create_task(coalescer.submit([1]))
    await calls.started.wait()
    calls.started.clear()
    waiting = asyncio.create_task(coalescer.submit([2]))
    calls.release.set()
    for task in (first, waiting):
        with pytest.raises(asyncio.CancelledError):
            await task
    calls.fail = None
    assert await coalescer.submit([3]) == [30]
    assert calls.batches == [[1], [3]]
