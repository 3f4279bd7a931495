"""Publishes that arrive while one is under way go to Redis together, in one script call.

A script call costs the node a round trip (a write, a wake-up, a read: about 45 µs of CPU on the
machine in docs/performance.md, over `pipe`), and Redis a script run, whatever it carries.
Under load, concurrent publish requests therefore share calls: one call is in flight at a time
and every publish that arrives meanwhile waits for the next, which carries all of them. A lone
publisher waits for nobody. Messages that leave in one call also arrive on every node in
one notification per channel, so they are flushed to subscribers together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_ITEMS = 500
"""Items per call, at most (one request's items are never split): a script blocks Redis while it
runs."""


class Coalescer(Generic[T, R]):
    """Runs `call` on the items of every waiting `submit`, one call at a time, and hands each
    submitter the results of its own items, in order. A failed call fails all its submitters."""

    def __init__(self, call: Callable[[list[T]], Awaitable[Sequence[R]]]) -> None:
        self._call = call
        self._waiting: list[tuple[Sequence[T], asyncio.Future[list[R]]]] = []
        self._running: asyncio.Task[None] | None = None

    async def submit(self, items: Sequence[T]) -> list[R]:
        future: asyncio.Future[list[R]] = asyncio.get_running_loop().create_future()
        self._waiting.append((items, future))
        if self._running is None:
            self._running = asyncio.create_task(self._drain())
        # The call runs in its own task: a submitter that is cancelled (its future with it)
        # leaves the call, shared with others, to run on.
        return await future

    async def _drain(self) -> None:
        try:
            while self._waiting:
                await self._run(self._take())
        finally:
            self._running = None
            waiting, self._waiting = self._waiting, []  # left only when the call was cancelled
            for _, future in waiting:
                future.cancel()

    def _take(self) -> list[tuple[Sequence[T], asyncio.Future[list[R]]]]:
        taken, count = 0, 0
        for items, _ in self._waiting:
            if taken and count + len(items) > MAX_ITEMS:
                break
            taken += 1
            count += len(items)
        batch, self._waiting = self._waiting[:taken], self._waiting[taken:]
        return batch

    async def _run(self, batch: list[tuple[Sequence[T], asyncio.Future[list[R]]]]) -> None:
        try:
            results = await self._call([item for items, _ in batch for item in items])
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        start = 0
        for items, future in batch:
            if not future.done():
                future.set_result(list(results[start : start + len(items)]))
            start += len(items)
