"""The publisher's batches of one round (pushserver_burnin.publisher.in_turn): each connection
sends the next batch as soon as its last is answered, never waiting for a slower connection."""

from __future__ import annotations

from typing import cast

import gevent.event

from pushserver_burnin.publisher import in_turn
from pushserver_measure.http11 import Connection, Endpoint


def test_a_slow_batch_does_not_hold_the_other_connections_back() -> None:
    slow, fast = (Connection(Endpoint("127.0.0.1", 9)) for _ in range(2))
    sent: dict[int, Connection] = {}
    fast_went_on = gevent.event.Event()
    waited: list[bool] = []

    def send(job: int, conn: Connection) -> int:
        sent[job] = conn
        if conn is slow and not waited:
            # the slow connection's first batch is answered only once the fast one has sent
            # three more; sent in groups of two, the fast one would wait for it instead
            waited.append(fast_went_on.wait(timeout=10))
        elif conn is fast and list(sent.values()).count(fast) == 3:
            fast_went_on.set()
        gevent.sleep(0)  # a request's round trip: let the other greenlet run
        return job

    assert in_turn([1, 2, 3, 4, 5], [slow, fast], send) == 15
    assert waited == [True]
    assert sorted(sent) == [1, 2, 3, 4, 5]  # each batch once
    assert sent[1] is slow and [sent[n] for n in (2, 3, 4)] == [fast] * 3


def test_fewer_batches_than_connections_use_as_many_connections() -> None:
    conns = [cast(Connection, object()) for _ in range(4)]
    used: list[object] = []
    assert in_turn([7], conns, lambda job, conn: used.append(conn) or job) == 7
    assert used == [conns[0]]
