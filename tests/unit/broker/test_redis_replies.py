"""Replies: each Redis reply answers the oldest command still waiting, however the bytes arrive."""

from __future__ import annotations

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from pushserver.broker.redis.pipe import Replies


class Transport:
    """What Replies uses of a transport: what was written, and whether it was dropped."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def abort(self) -> None:
        self.aborted = True


def connected() -> tuple[Replies, Transport]:
    replies, transport = Replies(), Transport()
    replies.connection_made(transport)  # type: ignore[arg-type]
    return replies, transport


async def test_replies_answer_commands_in_order_whatever_the_chunks() -> None:
    replies, transport = connected()
    first, second, third = (replies.send(b"cmd%d" % i) for i in range(3))
    assert transport.written == [b"cmd0", b"cmd1", b"cmd2"]
    replies.data_received(b"*2\r\n$1\r\na\r\n:4")  # the first reply split, ...
    assert not first.done()
    replies.data_received(b"2\r\n+OK\r\n-ERR no\r")  # ... the second whole, the third split
    assert first.result() == [b"a", 42]
    assert second.result() == b"OK"
    assert not third.done()
    replies.data_received(b"\n")
    error = third.result()
    assert isinstance(error, ResponseError) and str(error) == "ERR no"
    assert not transport.aborted


async def test_a_command_given_up_keeps_its_place_so_its_reply_answers_nobody_else() -> None:
    replies, _ = connected()
    given_up, waiting = replies.send(b"a"), replies.send(b"b")
    given_up.cancel()
    replies.data_received(b"+for a\r\n+for b\r\n")
    assert waiting.result() == b"for b"


@pytest.mark.parametrize("data", [b"+OK\r\n+unasked\r\n", b"+OK\r\n?garbled\r\n"])
async def test_a_reply_nobody_asked_for_or_garbled_bytes_drop_the_connection(data: bytes) -> None:
    replies, transport = connected()
    asked = replies.send(b"a")
    replies.data_received(data)
    assert asked.result() == b"OK"
    assert transport.aborted and replies.lost


async def test_a_lost_connection_fails_every_command_still_waiting() -> None:
    replies, _ = connected()
    answered, left = replies.send(b"a"), replies.send(b"b")
    replies.data_received(b"+OK\r\n")
    replies.connection_lost(None)
    assert answered.result() == b"OK"
    with pytest.raises(RedisConnectionError):
        left.result()
    assert replies.lost and not replies.waiting
