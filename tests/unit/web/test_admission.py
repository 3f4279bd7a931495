"""Admission: held subscribers counted by transport and address, the limits on them, and the
unfinished heads counted apart (`web/admission.py`)."""

from __future__ import annotations

from collections import Counter

import pytest

from pushserver.config import Settings
from pushserver.core.errors import TooMany, Unavailable
from pushserver.web.admission import HEAD, RESERVE, Admission, HeadGuard


def admission(**settings: object) -> Admission:
    return Admission(Settings(**settings), Counter())


def test_counts_per_address_go_back_to_nothing() -> None:
    books = admission()
    guard = HeadGuard(books)
    books.admit("sse", "10.0.0.1")
    books.admit("ws", "10.0.0.1")
    conn = Waiting(guard)
    guard.start(conn, "10.0.0.1", 0.0)  # still sending its head: counted apart from held ones
    assert (books.total, books.per_ip["10.0.0.1"], books.connections[HEAD]) == (2, 2, 1)
    books.leave("sse", "10.0.0.1")
    books.leave("ws", "10.0.0.1")
    guard.finish(conn, "10.0.0.1")
    assert books.total == 0 and "10.0.0.1" not in books.per_ip
    assert books.connections == {"sse": 0, "ws": 0, HEAD: 0}


def test_the_server_limit_refuses_the_next_and_counts_it() -> None:
    books = admission(max_connections=2)
    books.admit("longpoll", "10.0.0.1")
    books.admit("longpoll", "10.0.0.2")
    with pytest.raises(Unavailable) as refused:
        books.admit("stream", "10.0.0.3")
    assert refused.value.code == "over_capacity"
    assert books.limits_hit == {"max_connections": 1}
    assert books.total == 2 and "10.0.0.3" not in books.per_ip  # a refusal counts nothing
    books.leave("longpoll", "10.0.0.1")
    books.admit("stream", "10.0.0.3")  # room again


def test_the_address_limit_refuses_only_that_address() -> None:
    books = admission(max_connections_per_ip=1)
    books.admit("sse", "10.0.0.1")
    with pytest.raises(TooMany) as refused:
        books.admit("sse", "10.0.0.1")
    assert refused.value.code == "too_many_connections"
    books.admit("sse", "10.0.0.2")
    assert books.limits_hit == {"max_connections_per_ip": 1}


class Waiting:
    """A connection at the door; `give_way` as the server's does."""

    def __init__(self, guard: HeadGuard, resting: bool = False) -> None:
        self.guard = guard
        self.resting = resting
        self.reserved = False
        self.closed = False

    def give_way(self) -> None:
        self.closed = True
        self.guard.served(self)
        if self.reserved:
            return
        if self.resting:
            self.guard.stir(self, "10.0.0.1")
        else:
            self.guard.finish(self, "10.0.0.1")


def door(guard: HeadGuard, heads: list[float], resting: list[float]) -> list[Waiting]:
    """Connections waiting for a head since each of `heads`, resting since each of `resting`."""
    waiting = []
    for since in heads:
        waiting.append(Waiting(guard))
        guard.start(waiting[-1], "10.0.0.1", since)
    for since in resting:
        waiting.append(Waiting(guard, resting=True))
        guard.rest(waiting[-1], "10.0.0.1", since)
    return waiting


def test_unfinished_heads_fill_the_door_and_the_longest_resting_goes_first() -> None:
    books = admission(max_connections=3)
    guard = HeadGuard(books)
    head, first, second = door(guard, [10.0], [10.2, 10.4])
    assert guard.crowded()
    assert guard.enter(Waiting(guard), "10.0.0.9", 10.5) is None
    assert (head.closed, first.closed, second.closed) == (False, True, False)
    assert not guard.crowded()
    books.admit("longpoll", "10.0.0.9")  # held subscribers are bounded apart from heads


def test_a_head_past_the_grace_gives_way_before_a_young_resting_one() -> None:
    """The connection waiting longest goes first, whether for a head or kept alive, once it
    has waited past --head-grace; a young resting one (a long-poll about to re-poll) only
    when no head is that old."""
    guard = HeadGuard(admission(max_connections=3, head_grace=1.0))
    old_head, _, resting = door(guard, [10.0, 10.9], [10.95])
    assert guard.make_room(11.5) and old_head.closed and not resting.closed
    guard = HeadGuard(admission(max_connections=3, head_grace=1.0))
    resting, head = door(guard, [10.5], [10.0])[::-1]
    assert guard.make_room(11.2) and resting.closed and not head.closed  # rested longest
    guard = HeadGuard(admission(max_connections=2, head_grace=1.0))
    head, resting = door(guard, [10.5], [10.9])
    assert guard.make_room(11.0) and resting.closed and not head.closed  # no head past grace


def test_young_heads_alone_are_never_closed_and_the_reserve_lets_operators_in() -> None:
    """A flood of heads younger than the grace is not closed for newcomers: they come in on
    the operators' reserve, the longest on it giving way once it is full."""
    books = admission(max_connections=2, head_grace=1.0)
    guard = HeadGuard(books)
    heads = door(guard, [10.0, 10.1], [])
    spared = []
    for _ in range(RESERVE + 1):
        spared.append(Waiting(guard))
        assert guard.enter(spared[-1], "10.0.0.9", 10.5) is None and spared[-1].reserved
    assert [conn.closed for conn in spared] == [True] + [False] * RESERVE
    assert books.limits_hit == {"max_connections": 1}
    assert not any(conn.closed for conn in heads)
    guard.served(spared[1])  # its head came, for an operator's route: off the reserve
    guard.served(spared[1])
    assert len(guard.spares) == RESERVE - 1
    late = Waiting(guard)
    assert guard.enter(late, "10.0.0.9", 11.2) is None  # the first head is past its grace
    assert heads[0].closed and not late.reserved


def test_the_head_timeout_shortens_under_pressure() -> None:
    guard = HeadGuard(admission(max_connections=100, request_timeout=60.0, head_grace=1.0))
    timeouts = []
    for count in (10, 40, 25, 15, 9, 1):
        door(guard, [0.0] * count, [])
        timeouts.append(guard.head_timeout())
    assert timeouts == [60.0, 60.0, 30.0, pytest.approx(12.0), pytest.approx(1.2), 1.0]
