"""`--churn RATE`: subscribers dropped and resumed from their cursors, as mobile networks do.

The master decides how many to drop each tick while a step publishes and drains, and shares
them out over the processes that hold subscribers, in proportion to how many each holds; each
process drops that many of its live subscribers at random (`drop`). A dropped subscriber
resumes at once from its last cursor, so whatever it misses is delivered late or announced by a
gap: the step's loss and duplicate counts say whether the server kept that promise.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

import gevent

TICK = 0.2  # seconds between two rounds of drops

DropHook = Callable[[Mapping[str, int]], None]
"""Drop this many subscribers in each process (by the name its reports come under)."""


class Droppable(Protocol):
    def drop(self) -> bool: ...


def share(count: int, held: Mapping[str, int]) -> dict[str, int]:
    """`count` drops shared over processes in proportion to the subscribers each holds
    (largest remainders), never more than a process holds."""
    total = sum(held.values())
    if total <= 0 or count <= 0:
        return {}
    count = min(count, total)
    exact = {node: count * n / total for node, n in held.items()}
    shares = {node: int(value) for node, value in exact.items()}
    left = count - sum(shares.values())
    for node in sorted(exact, key=lambda node: exact[node] - shares[node], reverse=True)[:left]:
        shares[node] += 1
    return {node: n for node, n in shares.items() if n}


def drop(subscribers: Collection[Droppable], count: int) -> int:
    """Drop `count` of the connected `subscribers`, chosen at random; returns how many."""
    chosen = random.sample(list(subscribers), min(count, len(subscribers)))
    return sum(1 for subscriber in chosen if subscriber.drop())


class Churner:
    """Runs on the master while a step publishes and drains: RATE drops a second."""

    def __init__(self, rate: float, held: Callable[[], Mapping[str, int]], hook: DropHook) -> None:
        self.rate = rate
        self.held = held
        self.hook = hook
        self.asked = 0
        self.greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        if self.rate > 0 and self.greenlet is None:
            self.greenlet = gevent.spawn(self._run)

    def stop(self) -> int:
        """Stop dropping; returns how many drops were asked for since `start`."""
        if self.greenlet is not None:
            self.greenlet.kill()
            self.greenlet = None
        asked, self.asked = self.asked, 0
        return asked

    def _run(self) -> None:
        owed = 0.0
        while True:
            gevent.sleep(TICK)
            owed += self.rate * TICK
            count = int(owed)
            if count:
                owed -= count
                shares = share(count, self.held())
                self.asked += sum(shares.values())
                if shares:
                    self.hook(shares)
