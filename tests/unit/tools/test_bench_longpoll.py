"""The bench's long-poll loop (`pushserver_bench.client.LongPoller`), driven by hand: each answer
is read and the next poll sent in the callback that received it."""

from __future__ import annotations

import time

import orjson

from pushserver_bench.client import (
    EncodedLongPoller,
    HttpConnection,
    LongPoller,
    Tally,
    get_request,
)
from pushserver_bench.targets import NchanLongPoller


class Transport:
    """Keeps what the client writes; `arrived` is what the kernel would say of each read."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False
        self.arrived: float | None = time.time()

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def close(self) -> None:
        self.closed = True


def answer(status: int, body: bytes) -> bytes:
    return b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%b" % (status, len(body), body)


def poll_answer(cursor: str, *datas: object, gap: bool = False) -> bytes:
    messages: list[object] = [{"type": "gap", "from": 1, "to": 2}] if gap else []
    messages += [{"id": i, "data": d} for i, d in enumerate(datas, 1)]
    return answer(200, orjson.dumps({"messages": messages, "cursor": cursor}))


def started(expect: int) -> tuple[LongPoller, HttpConnection, Transport, Tally]:
    conn = HttpConnection()
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    tally = Tally(parse=True)
    poller = LongPoller(conn, "news", tally, expect)
    poller.start(30)
    return poller, conn, transport, tally


def test_each_answer_sends_the_next_poll_with_its_cursor() -> None:
    poller, conn, transport, tally = started(expect=3)
    assert transport.sent == [get_request("/lp/news?timeout=30&cursor=")]
    reply = poll_answer("news:1:1", {"t": 1.0}) + poll_answer("news:1:3", {"t": 2.0}, "x")
    conn.data_received(reply[:7])  # cut anywhere: nothing until an answer is whole
    assert len(transport.sent) == 1
    conn.data_received(reply[7:])
    assert transport.sent[1:] == [get_request("/lp/news?timeout=30&cursor=news:1:1")]
    assert tally.received == 3 and poller.stopped  # the third message was the last expected
    assert len(tally.latencies) == 2  # the one without a send time is counted, not timed
    assert not tally.errors


def test_a_refusal_a_gap_and_a_lost_connection_are_errors() -> None:
    _, conn, transport, tally = started(expect=0)
    conn.data_received(poll_answer("news:1:4", "x", gap=True))
    assert tally.errors == [
        "long-poll fell behind the history: [{'type': 'gap', 'from': 1, 'to': 2}]"
    ]
    conn.data_received(answer(503, b"busy"))
    assert tally.errors[1:] == ["long-poll answered 503 b'busy'"]
    assert len(transport.sent) == 2  # no poll after the refusal
    conn.connection_lost(None)
    assert len(tally.errors) == 2  # already stopped: the close is not a second error

    poller, conn, _, tally = started(expect=0)
    conn.connection_lost(None)
    assert tally.errors == ["long-poll: server closed the connection"]
    poller.stop()
    assert tally.errors == ["long-poll: server closed the connection"]


def test_an_answer_that_is_not_a_poll_answer_is_an_error() -> None:
    _, conn, transport, tally = started(expect=0)
    conn.data_received(answer(200, b"<html>proxy error</html>"))
    assert len(tally.errors) == 1 and "not understood" in tally.errors[0], tally.errors
    assert "proxy error" in tally.errors[0] and transport.closed


def test_a_stopped_poller_reads_no_more() -> None:
    poller, conn, transport, tally = started(expect=0)
    poller.stop()
    assert transport.closed
    conn.data_received(poll_answer("news:1:1", "late"))
    conn.connection_lost(None)
    assert tally.received == 0 and not tally.errors and len(transport.sent) == 1


def test_messages_published_while_the_client_sat_on_an_answer_are_counted_late() -> None:
    poller, conn, transport, tally = started(expect=0)
    first_poll = poller.held[1]
    transport.arrived = first_poll + 1.0  # the answer came a second after the poll went out
    conn.data_received(poll_answer("news:1:1", {"t": first_poll + 0.5}))
    arrived, repolled = poller.held
    assert arrived == first_poll + 1.0 and repolled >= first_poll
    # Its re-poll went out `repolled`; it was read long after it arrived, so pretend the
    # answer arrived 10 s before that: anything published in those 10 s waited on the client.
    poller.held = (repolled - 10.0, repolled)
    transport.arrived = repolled + 0.1
    conn.data_received(
        poll_answer("news:1:4", {"t": repolled - 20.0}, {"t": repolled - 5.0}, {"t": repolled})
    )
    assert tally.late == 1  # published within the 10 s; before them, or at the poll, not
    assert [round(lat, 3) for lat in tally.latencies] == [0.5, 20.1, 5.1, 0.1]
    assert tally.received == 4 and not tally.errors


def test_a_read_without_a_receive_timestamp_is_timed_when_read_and_is_an_error() -> None:
    _, conn, transport, tally = started(expect=0)
    transport.arrived = None
    before = time.time()
    conn.data_received(poll_answer("news:1:1", {"t": before}))
    conn.data_received(poll_answer("news:1:2", {"t": before}))
    assert tally.errors == ["no receive timestamp on a read: latency timed when read"]
    assert tally.received == 2 and all(lat >= 0 for lat in tally.latencies)


def test_an_empty_answer_counts_as_a_timeout_only_once_a_message_arrived() -> None:
    _, conn, transport, tally = started(expect=0)
    conn.data_received(poll_answer("news:1:0"))  # a poll sent before the crowd was together
    assert tally.empty == 0 and len(transport.sent) == 2
    conn.data_received(poll_answer("news:1:1", {"t": 1.0}) + poll_answer("news:1:1"))
    assert tally.empty == 1 and tally.received == 1
    assert transport.sent[-1] == get_request("/lp/news?timeout=30&cursor=news:1:1")


def test_each_timed_message_keeps_its_first_and_last_arrival_and_late_polls_their_time() -> None:
    poller, conn, transport, tally = started(expect=0)
    polled = poller.held[1]
    transport.arrived = polled + 1.0
    conn.data_received(poll_answer("news:1:1", {"t": polled + 0.5}))
    repolled = poller.held[1]
    poller.held = (repolled - 10.0, repolled)  # as if it sat on that answer for 10 s
    transport.arrived = polled + 2.0
    conn.data_received(poll_answer("news:1:3", {"t": polled + 0.5}, {"t": repolled - 5.0}))
    transport.arrived = polled + 0.9  # an earlier arrival read later, in another connection
    conn.data_received(poll_answer("news:1:3", {"t": polled + 0.5}))
    assert tally.spans == {
        polled + 0.5: [polled + 0.9, polled + 2.0],
        repolled - 5.0: [polled + 2.0, polled + 2.0],
    }
    # Published while the client sat on the answer: its send time and the re-poll that fetched
    # it, for the verdict to compare with when the server began answering it.
    assert list(tally.waits) == [repolled - 5.0, repolled] and tally.late == 1


def test_a_plain_connection_times_a_read_when_it_is_made_whatever_the_transport_says() -> None:
    conn = HttpConnection()
    conn.plain = True
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    tally = Tally(parse=True)
    LongPoller(conn, "news", tally, 0).start(30)
    transport.arrived = 1.0  # a kernel stamp the plain client does not read
    before = time.time()
    conn.data_received(poll_answer("news:1:1", {"t": before}))
    assert before <= conn.read_at <= time.time() and conn.arrived == conn.read_at
    assert tally.spans == {before: [conn.read_at, conn.read_at]}
    assert tally.latencies == [conn.read_at - before] and not tally.errors


def test_an_encoded_poller_sends_its_cursor_as_encode_uri_component_writes_it() -> None:
    conn = HttpConnection()
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    tally = Tally(parse=True)
    EncodedLongPoller(conn, "news", tally, 0).start(30)
    conn.data_received(poll_answer("news:1:1,other:2:3", {"t": 1.0}))
    assert transport.sent[-1] == get_request(
        "/lp/news?timeout=30&cursor=news%3A1%3A1%2Cother%3A2%3A3"
    )


def test_nchans_poll_asks_again_with_the_last_answers_validators_as_sent() -> None:
    conn = HttpConnection(NchanLongPoller.KEEP)
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    poller = NchanLongPoller(conn, "/sub/news", Tally(parse=True), 3)
    poller.start(30)
    assert transport.sent == [get_request("/sub/news")]
    validators = {"If-Modified-Since": "Fri, 27 Nov 2026 22:30:00 GMT", "If-None-Match": "0"}
    body = orjson.dumps({"t": 1.0})
    head = b"HTTP/1.1 200 OK\r\nLast-Modified: %b\r\nEtag: %b\r\nContent-Length: %d\r\n\r\n" % (
        *(v.encode() for v in validators.values()),
        len(body),
    )
    conn.data_received(head + body)
    assert transport.sent[-1] == get_request("/sub/news", validators)
    conn.data_received(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
    assert transport.sent[-1] == get_request("/sub/news", validators)  # the same again
    assert poller.count == 1 and len(transport.sent) == 3
