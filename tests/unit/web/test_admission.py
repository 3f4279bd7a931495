"""Admission: held subscribers counted by transport and address, the limits on them, and the
unfinished heads counted apart (`web/admission.py`)."""

from __future__ import annotations

from collections import Counter

import pytest

from pushserver.config import Settings
from pushserver.core.errors import TooMany, Unavailable
from pushserver.web.admission import HEAD, Admission, HeadGuard


def admission(**settings: object) -> Admission:
    return Admission(Settings(**settings), Counter())


def test_counts_per_address_go_back_to_nothing() -> None:
    books = admission()
    guard = HeadGuard(books)
    books.admit("sse", "10.0.0.1")
    books.admit("ws", "10.0.0.1")
    guard.start("10.0.0.1")  # still sending its head: counted apart from held ones
    assert (books.total, books.per_ip["10.0.0.1"], books.connections[HEAD]) == (2, 2, 1)
    books.leave("sse", "10.0.0.1")
    books.leave("ws", "10.0.0.1")
    guard.finish("10.0.0.1")
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


class Resting:
    def __init__(self, guard: HeadGuard) -> None:
        self.guard = guard
        self.closed = False

    def close_resting(self) -> None:
        self.closed = True
        self.guard.stir(self, "10.0.0.1")


def test_unfinished_heads_fill_the_door_and_the_longest_resting_goes_first() -> None:
    books = admission(max_connections=3)
    guard = HeadGuard(books)
    guard.start("10.0.0.1")
    first, second = Resting(guard), Resting(guard)
    guard.rest(first, "10.0.0.1")
    guard.rest(second, "10.0.0.1")
    assert guard.crowded()
    assert isinstance(guard.full("10.0.0.9"), Unavailable)
    guard.reclaim()
    assert (first.closed, second.closed) == (True, False)
    assert not guard.crowded() and guard.full("10.0.0.9") is None
    books.admit("longpoll", "10.0.0.9")  # held subscribers are bounded apart from heads
