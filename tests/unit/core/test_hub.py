"""The hub's fan-out, with the memory broker and fake transports: no sockets, no server.

A publish through the memory broker yields once, which runs the flush, so each test's
`await hub.publish(...)` returns with every subscriber written to.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Callable

import orjson
import pytest

from pushserver.broker.memory import MemoryBroker
from pushserver.core.broker import Item
from pushserver.core.fanout import HEARTBEAT_SLICE
from pushserver.core.hub import Hub
from pushserver.core.messages import Message
from pushserver.core.positions import Position
from pushserver.core.subscription import Bound, Start, StreamSubscriber, Waiter
from pushserver.wire.framing import NDJSON, SSE, Framing, longpoll_body


class FakeTransport:
    """Records writes; `stalled` keeps written bytes unsent, as a client that stopped reading."""

    def __init__(self, stalled: bool = False, broken: bool = False) -> None:
        self.writes: list[bytes] = []
        self.stalled = stalled
        self.broken = broken
        self.unsent = 0
        self.aborted = False

    def write(self, data: bytes) -> None:
        if self.broken:
            raise RuntimeError("transport closed")
        self.writes.append(data)
        if self.stalled:
            self.unsent += len(data)

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True

    def lines(self) -> list[dict]:
        """NDJSON events written (chunked transfer undone)."""
        body = b""
        for chunk in self.writes:
            size, _, rest = chunk.partition(b"\r\n")
            assert int(size, 16) == len(rest) - 2 and rest.endswith(b"\r\n")
            body += rest[:-2]
        return [orjson.loads(line) for line in body.splitlines() if line]


class FakeStream(StreamSubscriber):
    ended = False

    def end(self) -> None:
        self.ended = True


class FakeWaiter(Waiter):
    def __init__(self, start: Start, wrap: Callable[[bytes], bytes] | None = None) -> None:
        super().__init__(start, Bound(100, 1 << 20))
        self._wrap = wrap
        self.answers: list[bytes] = []

    def wrapper(self) -> Callable[[bytes], bytes] | None:
        return self._wrap

    def resolve(self, body: bytes) -> None:
        self.answers.append(body)

    def send(self, answer: bytes) -> None:
        self.answers.append(answer)


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    hub = Hub(MemoryBroker(10, 300, 3600), max_buffer_bytes=1000)
    async with hub.broker.running(hub):
        yield hub


async def start(hub: Hub, names: list[str], cursor: dict[str, Position] | None = None) -> Start:
    channels = await hub.open(names, cursor or {})
    _, at = hub.backlog(channels, cursor or {}, 0)
    return Start(channels, at, "127.0.0.1")


async def stream(hub: Hub, names: list[str], framing: Framing = NDJSON, **kw: bool) -> FakeStream:
    sub = FakeStream(await start(hub, names), FakeTransport(**kw), framing)
    hub.attach(sub)
    return sub


async def waiter(
    hub: Hub, names: list[str], wrap: Callable[[bytes], bytes] | None = None
) -> FakeWaiter:
    poll = FakeWaiter(await start(hub, names), wrap)
    hub.add_waiter(poll)
    return poll


def epoch(hub: Hub, name: str) -> str:
    return hub.channels[name].epoch


async def test_one_channel_fan_out_writes_one_shared_frame_per_framing(hub):
    subs = [await stream(hub, ["a"]) for _ in range(3)]
    sse = [await stream(hub, ["a"], SSE) for _ in range(2)]
    await hub.publish([("a", b'"one"'), ("a", b'"two"')])

    frames = [s.transport.writes for s in subs + sse]
    assert all(len(f) == 1 for f in frames)  # both messages in one write
    assert frames[0][0] is frames[1][0] is frames[2][0]
    assert frames[3][0] is frames[4][0]
    e = epoch(hub, "a")
    assert [(m["id"], m["data"], m["cursor"]) for m in subs[0].transport.lines()] == [
        (1, "one", f"a:{e}:1"),
        (2, "two", f"a:{e}:2"),
    ]
    sse_events = frames[3][0].split(b"\r\n")[1].split(b"\n\n")
    assert [event.split(b"\n")[0] for event in sse_events] == [
        b"id: a:%b:%d" % (e.encode(), n) for n in (1, 2)
    ] + [b""]
    assert hub.stats.delivered == {"stream": 6, "sse": 4}
    assert hub.stats.messages_in == 2


async def test_multi_channel_streams_get_every_channel_in_publish_order_with_own_cursors(hub):
    ab = await stream(hub, ["a", "b"])
    bc = await stream(hub, ["b", "c"])
    await hub.publish([("a", b"1"), ("b", b"2"), ("c", b"3"), ("a", b"4")])

    ea, eb, ec = (epoch(hub, n) for n in "abc")
    u = hub.channels["b"].history.born  # the unstarted epoch b and c were subscribed in
    got = [(m["channel"], m["data"], m["cursor"]) for m in ab.transport.lines()]
    assert got == [
        ("a", 1, f"a:{ea}:1,b:{u}:0"),  # b not published to yet: its unstarted epoch
        ("b", 2, f"a:{ea}:1,b:{eb}:1"),
        ("a", 4, f"a:{ea}:2,b:{eb}:1"),
    ]
    got = [(m["channel"], m["data"], m["cursor"]) for m in bc.transport.lines()]
    assert got == [("b", 2, f"b:{eb}:1,c:{u}:0"), ("c", 3, f"b:{eb}:1,c:{ec}:1")]
    assert ab.cursor == f"a:{ea}:2,b:{eb}:1"


async def test_waiters_share_one_body_and_one_wrapped_answer(hub):
    wraps = []

    def wrap(body: bytes) -> bytes:
        wraps.append(body)
        return b"HEAD " + body

    plain = [await waiter(hub, ["a"]) for _ in range(2)]
    direct = [await waiter(hub, ["a"], wrap) for _ in range(3)]
    multi = await waiter(hub, ["a", "b"])
    await hub.publish([("a", b'"x"')])

    e, eb = epoch(hub, "a"), epoch(hub, "b")
    envelope = b'{"channel":"a","id":1,"ts":%b,"data":"x","cursor":"a:%b:1"}'
    body = plain[0].answers[0]
    ts = orjson.dumps(orjson.loads(body)["messages"][0]["ts"])
    assert body == longpoll_body([envelope % (ts, e.encode())], f"a:{e}:1")
    assert plain[1].answers == [body] and plain[1].answers[0] is body
    assert wraps == [body]
    assert all(w.answers == [b"HEAD " + body] for w in direct)
    assert direct[0].answers[0] is direct[2].answers[0]
    answer = orjson.loads(multi.answers[0])
    assert answer["cursor"] == f"a:{e}:1,b:{eb}:0"
    assert [m["cursor"] for m in answer["messages"]] == [f"a:{e}:1,b:{eb}:0"]
    assert not hub.waiters and not hub.channels["a"].waiters and not hub.channels["a"].multi
    assert hub.stats.delivered == {"longpoll": 6}


async def test_a_channels_waiters_are_answered_in_the_order_they_were_held(hub):
    """First held, first answered: a poll held again after it left goes after those held
    meanwhile. Streams and polls held on the channel are the hub's too, until they go."""
    told: list[FakeWaiter] = []

    class Told(FakeWaiter):
        def resolve(self, body: bytes) -> None:
            told.append(self)

    polls = [Told(await start(hub, ["a"])) for _ in range(40)]
    for poll in polls:
        hub.add_waiter(poll)
    again = polls[3]
    hub.remove_waiter(again)
    hub.add_waiter(again)
    assert list(hub.waiters) == list(hub.channels["a"].waiters) == [*polls[:3], *polls[4:], again]
    await hub.publish([("a", b'"x"')])
    assert told == [*polls[:3], *polls[4:], again]
    assert not hub.waiters and not hub.channels["a"].waiters
    sub = await stream(hub, ["a"])
    assert list(hub.streams) == [sub] and list(hub.channels["a"].streams[NDJSON]) == [sub]
    hub.detach(sub)
    hub.detach(sub)  # twice: nothing more
    assert not hub.streams and not hub.channels["a"].streams[NDJSON]


async def test_a_one_channel_waiter_keeps_no_cursor_and_answers_with_its_channels_cursor(hub):
    ahead = await waiter(hub, ["a"])
    behind = FakeWaiter(await start(hub, ["a"], {"a": Position(epoch(hub, "a"), 0)}))
    multi = await waiter(hub, ["a", "b"])
    assert ahead.at == {} and behind.at is ahead.at  # one shared, empty, never written
    await hub.publish([("a", b'"x"')])
    hub.add_waiter(behind)
    behind.expire()
    ahead.expire()
    cursor = f"a:{epoch(hub, 'a')}:1"
    assert orjson.loads(behind.answers[0])["cursor"] == cursor
    assert orjson.loads(ahead.answers[0])["cursor"] == cursor
    assert multi.at == {"a": cursor, "b": f"b:{epoch(hub, 'b')}:0"} and ahead.at == {}
    assert multi.cursor == f"{cursor},b:{epoch(hub, 'b')}:0"


async def test_a_slow_consumer_is_cut_off_at_max_buffer_bytes(hub):
    fast = await stream(hub, ["a"])
    slow = await stream(hub, ["a"], stalled=True)
    gone = await stream(hub, ["a"], broken=True)
    multi = await stream(hub, ["a", "b"], stalled=True)
    await hub.publish([("a", b'"%b"' % (b"x" * 400))])
    assert all(not s.transport.aborted for s in (fast, slow, multi))

    await hub.publish([("a", b'"%b"' % (b"x" * 700))])
    assert [m["id"] for m in fast.transport.lines()] == [1, 2]
    for sub in (slow, gone, multi):
        assert sub.transport.aborted and sub.ended and sub.reason == "slow"
    assert list(hub.streams) == [fast]
    assert hub.stats.limits_hit["max_buffer_bytes"] == 3
    await hub.publish([("a", b"3")])
    assert len(slow.transport.writes) == 2


async def test_sweep_forgets_channels_nobody_is_held_on(hub):
    opened = await hub.open(["idle", "kept", "old", "gone"], {})
    await hub.publish([("kept", b"1"), ("old", b"2"), ("gone", b"3")])
    hub.release(opened)  # "idle", never published to, goes with its last subscription
    assert set(hub.channels) == set(hub.broker.history) == {"kept", "old", "gone"}
    del hub.broker.history["gone"]  # as if the broker had dropped it
    sub = await stream(hub, ["held"])

    assert await hub.sweep(idle_after=3600) == 1  # "gone" went on from a dropped history
    assert set(hub.channels) == {"kept", "old", "held"}
    assert await hub.sweep(idle_after=0) == 2  # idle long enough
    assert set(hub.channels) == {"held"}
    hub.detach(sub)
    hub.release(sub.channels)
    assert not hub.channels
    assert set(hub.broker.history) == {"kept", "old"}  # what subscribers resume from stays


async def test_sweeps_give_back_the_room_of_channels_gone_with_their_subscribers(hub):
    names = [f"flood{i}" for i in range(20_000)]
    sub = await stream(hub, names[:10])
    opened = await hub.open(names[10:], {})  # a flood of channels nobody publishes to
    full = sys.getsizeof(hub.channels), sys.getsizeof(hub.broker.history)
    hub.release(opened)
    assert len(hub.channels) == len(hub.broker.history) == 10
    assert await hub.sweep(idle_after=3600) == 0  # nothing left to drop: only the room
    await hub.broker.sweep()
    assert sys.getsizeof(hub.channels) * 20 < full[0]
    assert sys.getsizeof(hub.broker.history) * 20 < full[1]
    assert list(hub.channels) == list(hub.broker.history) == names[:10]
    hub.detach(sub)
    hub.release(sub.channels)
    assert not hub.channels


async def test_a_jump_to_a_new_epoch_announces_a_gap_to_streams_and_waiters(hub):
    await hub.publish([("a", b"0")])  # "a" has an epoch of its own, which Redis then loses
    one = await stream(hub, ["a"])
    two = await stream(hub, ["a", "b"])
    poll = await waiter(hub, ["a"])
    await hub.publish([("b", b"1")])
    hub.broker.history.reset("a", "fresh", 7, [])
    hub.jump("a")

    gap = {"type": "gap", "channel": "a", "from": 1, "to": 7, "reason": "epoch"}
    assert one.transport.lines() == [{**gap, "cursor": "a:fresh:7"}]
    eb = epoch(hub, "b")
    assert two.transport.lines()[-1] == {**gap, "cursor": f"a:fresh:7,b:{eb}:1"}
    assert orjson.loads(poll.answers[0]) == {
        "messages": [{**gap, "cursor": "a:fresh:7"}],
        "cursor": "a:fresh:7",
    }
    assert not hub.waiters and one.cursor == "a:fresh:7"


async def test_a_jump_sends_what_was_dispatched_first_then_the_expired_gap_and_the_rest(hub):
    sub = await stream(hub, ["a"])
    e = epoch(hub, "a")
    now = time.time()
    first = Message("a", e, 1, now, b"1")
    hub.broker.history.append(first)
    hub.append(first)  # dispatched, not flushed yet
    later = [Message("a", e, n, now, b"%d" % n) for n in (8, 9)]
    hub.broker.history.reset("a", e, 9, later)
    hub.jump("a")

    got = sub.transport.lines()
    assert [m.get("id") for m in got] == [1, None, 8, 9]
    assert got[1] == {
        "type": "gap",
        "channel": "a",
        "from": 2,
        "to": 7,
        "reason": "expired",
        "cursor": f"a:{e}:7",
    }
    assert sub.cursor == f"a:{e}:9"


async def test_drain_answers_polls_tells_streams_to_reconnect_and_all_gone_waits(hub):
    sub = await stream(hub, ["a"])
    await hub.publish([("a", b"1")])
    poll = await waiter(hub, ["a", "b"])
    e, eb = epoch(hub, "a"), epoch(hub, "b")
    hub.shutdown.drain()

    assert orjson.loads(poll.answers[0]) == {"messages": [], "cursor": f"a:{e}:1,b:{eb}:0"}
    assert sub.transport.lines()[-1] == {"type": "reconnect", "cursor": f"a:{e}:1"}
    assert sub.ended and sub.reason == "shutdown"

    gone = asyncio.ensure_future(hub.shutdown.all_gone())
    await asyncio.sleep(0)  # one turn of the loop: all_gone is now waiting
    assert not gone.done()
    hub.detach(sub)
    hub.detach(sub)  # twice is harmless
    assert not gone.done()
    hub.remove_waiter(poll)
    await asyncio.wait_for(gone, 5)


async def test_all_gone_returns_at_once_when_nothing_is_held(hub):
    await asyncio.wait_for(hub.shutdown.all_gone(), 5)


async def test_all_gone_waits_for_a_connection_that_lingers_to_close(hub):
    sub = await stream(hub, ["a"])
    hub.detach(sub)  # out of the fan-out, its close under way
    hub.shutdown.linger(sub)
    gone = asyncio.ensure_future(hub.shutdown.all_gone())
    await asyncio.sleep(0)  # one turn of the loop: all_gone is now waiting
    assert not gone.done()
    hub.shutdown.closed(sub)
    await asyncio.wait_for(gone, 5)
    hub.shutdown.closed(sub)  # twice is harmless


async def test_a_cursor_past_the_pending_flush_gets_nothing_twice(hub):
    """A re-poll landing on a node that has a message (from the shared broker) not yet flushed,
    with a cursor (from another node) already past it: the message goes out first."""
    late = await waiter(hub, ["a"])  # held before the message: must get it
    one = Message("a", "E1", 1, time.time(), b'"one"')
    hub.broker.history.append(one)  # as a shared broker reports one from another node
    hub.append(one)  # pending: flushed at loop's turn
    ahead = FakeWaiter(await start(hub, ["a"], {"a": Position("E1", 1)}))
    hub.add_waiter(ahead)
    await asyncio.sleep(0)
    assert ahead.answers == [] and hub.channels["a"].sent_id == 1
    assert [m["id"] for m in orjson.loads(late.answers[0])["messages"]] == [1]
    await hub.publish([("a", b'"two"')])
    assert [m["id"] for m in orjson.loads(ahead.answers[0])["messages"]] == [2]


async def test_a_message_nobody_is_held_on_is_sent_at_once_and_kept(hub):
    """No flush waits for a channel with no subscriber; the history still has the message for
    a subscriber that comes with a cursor from before it."""
    [(message, audience)] = hub.publish_now([Item("quiet", b'"one"')])
    assert audience == 0 and not hub.flushing and "quiet" not in hub.channels
    assert hub.stats.messages_in == 1 and hub.stats.delivered == {}
    kept = hub.broker.history["quiet"]
    before = {"quiet": Position(kept.born, 0)}
    (ch,) = await hub.open(["quiet"], before)
    assert (ch.sent_id, ch.sent_position, ch.pending) == (1, message.position, [])
    events, _ = hub.backlog((ch,), before, 0)
    assert [(e.position, e.body(b"c")) for e in events] == [(message.position, message.body(b"c"))]


async def test_publish_now_leaves_the_deliveries_to_the_flush_it_makes_due(hub):
    """The memory broker publishes at once; with a subscriber held, the flush is due and
    writes on the loop's turn (the front end answers the publisher after it)."""
    sub = await stream(hub, ["a"])
    [(message, audience)] = hub.publish_now([Item("a", b'"one"', "k")])
    assert audience == 1 and message.id == 1 and hub.flushing and sub.transport.writes == []
    await asyncio.sleep(0)
    assert not hub.flushing and [m["id"] for m in sub.transport.lines()] == [1]
    [(again, _)] = hub.publish_now([Item("a", b'"one"', "k")])  # a repeated key: nothing new
    assert again.id == 1 and not hub.flushing


async def test_what_follows_a_flush_runs_at_its_end_in_its_own_callback(hub, caplog):
    """A publisher's 201 and the settling of the polls a flush answered run after every write
    of the flush, in the same loop callback: one loop turn, not one each."""
    sub = await stream(hub, ["a"])
    held = await waiter(hub, ["a"])
    assert not hub.after_flush(pytest.fail)  # nothing due: the caller goes on at once
    ran: list[tuple[str, int, int]] = []

    def seen(what: str) -> None:
        ran.append((what, len(sub.transport.writes), len(held.answers)))

    def during() -> None:  # registered while the flush runs, as a long-poll's settling is
        assert hub.after_flush(seen, ("during",))

    def resolve(body: bytes) -> None:  # as declared: compiled, the flush checks it
        held.answers.append(body)
        during()

    held.resolve = resolve  # type: ignore[method-assign]
    hub.publish_now([Item("a", b'"one"')])
    assert hub.after_flush(seen, ("due",)) and hub.after_flush(lambda: 1 / 0)
    assert hub.after_flush(seen, ("last",)) and ran == []
    loop = asyncio.get_running_loop()
    turn = loop.create_future()
    loop.call_soon(turn.set_result, None)  # queued after the flush's callback
    await turn
    assert ran == [("due", 1, 1), ("last", 1, 1), ("during", 1, 1)]
    assert "after a flush" in caplog.text  # the one that failed, logged; the rest ran
    assert not hub.after_flush(pytest.fail)


async def test_a_flush_put_off_for_company_is_not_waited_for(hub):
    """After a costly flush the next waits a little for more messages: nothing waits for it,
    or a publisher answered after it could put only one message in each."""
    await stream(hub, ["a"])
    hub.fanout.flush_delay = 0.05
    hub.fanout.last_flush_end = asyncio.get_running_loop().time()
    hub.publish_now([Item("a", b'"one"')])
    assert hub.flushing and not hub.after_flush(pytest.fail)
    hub.fanout.flush()
    assert not hub.flushing


async def test_a_heartbeat_writes_a_slice_per_loop_turn_once_to_every_stream_still_held(hub):
    subs = [
        await stream(hub, ["a"], SSE if i % 2 else NDJSON) for i in range(HEARTBEAT_SLICE * 2 + 7)
    ]
    beating = asyncio.create_task(hub.fanout.heartbeat())
    await asyncio.sleep(0)  # one loop turn: the task wrote its first slice
    assert sum(bool(s.transport.writes) for s in subs) == HEARTBEAT_SLICE
    gone = next(s for s in subs if not s.transport.writes)  # one the heartbeat has yet to reach
    subs.remove(gone)
    hub.detach(gone)
    await beating
    assert not gone.transport.writes
    assert [s.transport.writes for s in subs] == [
        [s.framing.chunk(s.framing.comment(b""))] for s in subs
    ]


async def test_a_channel_on_a_history_the_broker_replaced_goes_on_from_the_new_one(hub):
    """A shared engine may drop a history and read it again (it stopped following the channel
    meanwhile): the hub's channel is no longer current, and the next open moves it onto the
    new history, with a gap for whoever is held on it."""
    await hub.publish([("a", b"1")])
    sub = await stream(hub, ["a"])
    ch = hub.channels["a"]
    assert hub.current(ch)
    later = [Message("a", "fresh", n, time.time(), b"%d" % n) for n in (3, 4)]
    hub.broker.history.load("a", "fresh", 4, later)  # another object for the same channel
    assert not hub.current(ch)
    assert hub.open_now(["a"], {}) == (ch,) and hub.current(ch)
    assert ch.history is hub.broker.history["a"] and ch.sent_position == "a:fresh:4"
    gap, *messages = sub.transport.lines()
    assert (gap["type"], gap["reason"], gap["from"], gap["to"]) == ("gap", "epoch", 1, 2)
    assert [(m["id"], m["cursor"]) for m in messages] == [(3, "a:fresh:3"), (4, "a:fresh:4")]


async def test_a_message_expired_before_its_flush_still_reaches_those_held(hub):
    """The fan-out writes the messages it was handed, not the history: an expiry between a
    publish and its flush loses nothing for subscribers already held."""
    sub = await stream(hub, ["a"])
    hub.publish_now([Item("a", b'"one"')])
    hub.broker.history["a"].expire(1.0, now=time.time() + 10)
    await asyncio.sleep(0)
    assert [m["id"] for m in sub.transport.lines()] == [1]
