"""The fan-out to compressed subscribers, with the memory broker and fake transports.

Each frame is deflated once per form: every subscriber that got the frame before shares one
bytes object, a newcomer gets the frame on its own, heartbeats keep the chain, and what each
subscriber is written decodes, message by message, to exactly what an uncompressed subscriber
of the same framing gets.
"""

from __future__ import annotations

import zlib

import orjson

from pushserver.core.fanout import Answer
from pushserver.core.messages import Message, frame_events
from pushserver.core.subscription import StreamSubscriber
from pushserver.wire.compression import (
    GZIP_HEADER,
    SYNC_TAIL,
    GzipStream,
    LoneReceiver,
    Receiver,
)
from pushserver.wire.framing import NDJSON, SSE, SSE_COMPACT, WEBSOCKET, Framing

from .test_hub import FakeStream, FakeTransport, epoch, hub, start, stream

__all__ = ["hub"]


def unchunk(writes: list[bytes]) -> list[bytes]:
    """Each write's payload, chunked transfer undone (one chunk a write, or several)."""
    payloads = []
    for data in writes:
        out = b""
        while data:
            size, _, rest = data.partition(b"\r\n")
            n = int(size, 16)
            out += rest[:n]
            data = rest[n + 2 :]
        payloads.append(out)
    return payloads


class Gunzip:
    """A gzip stream decoded write by write: each write must decode whole at once."""

    def __init__(self) -> None:
        self.decoder = zlib.decompressobj(31)
        self.decoder.decompress(GZIP_HEADER)

    def feed(self, payload: bytes) -> bytes:
        return self.decoder.decompress(payload)


async def gzip_stream(hub, names: list[str], framing: Framing = NDJSON) -> FakeStream:
    twin = framing.compressed()
    assert twin.coding is not None
    sub = FakeStream(await start(hub, names), FakeTransport(), twin, GzipStream(twin.coding))
    hub.attach(sub)
    return sub


def decoded(sub: StreamSubscriber) -> list[bytes]:
    gunzip = Gunzip()
    return [gunzip.feed(p) for p in unchunk(sub.transport.writes)]  # type: ignore[attr-defined]


async def test_compressed_subscribers_share_each_form_and_decode_to_the_plain_bytes(hub):
    plain = await stream(hub, ["a"], SSE)
    zipped = [await gzip_stream(hub, ["a"], SSE) for _ in range(3)]
    await hub.publish([("a", b'{"price":101,"sym":"ABC"}')])
    late = await gzip_stream(hub, ["a"], SSE)
    await hub.publish([("a", b'{"price":102,"sym":"ABC"}'), ("a", b'{"price":103,"sym":"ABC"}')])
    hub.fanout.flush()

    for n in range(2):
        assert zipped[0].transport.writes[n] is zipped[1].transport.writes[n]
        assert zipped[1].transport.writes[n] is zipped[2].transport.writes[n]
    # the newcomer got the second batch on its own (it never got the first), the others
    # chained to the first: fewer bytes for the same text
    assert late.transport.writes[0] is not zipped[0].transport.writes[1]
    assert len(zipped[0].transport.writes[1]) < len(late.transport.writes[0])
    texts = [b"".join(decoded(sub)) for sub in zipped]
    assert texts[0] == texts[1] == texts[2] == b"".join(unchunk(plain.transport.writes))
    assert decoded(late) == unchunk(plain.transport.writes)[1:]
    assert hub.stats.delivered == {"sse": 3 + 3 * 3 + 2}


async def test_a_heartbeat_keeps_the_chain_and_the_trailer_ends_a_whole_gzip_member(hub):
    sub = await gzip_stream(hub, ["a"])
    peer = await gzip_stream(hub, ["a"])
    await hub.publish([("a", b'{"t":21.5,"device":"th-1"}')])
    await hub.fanout.heartbeat()
    await hub.publish([("a", b'{"t":21.6,"device":"th-1"}')])
    hub.shutdown.drain()
    assert sub.ended and sub.reason == "shutdown"
    assert isinstance(sub.coder, GzipStream)
    trailer = sub.framing.chunk(sub.coder.end())

    assert sub.transport.writes[1] is peer.transport.writes[1]  # one heartbeat for all
    assert sub.transport.writes[2] is peer.transport.writes[2]  # chained across it, shared
    body = GZIP_HEADER + b"".join(unchunk([*sub.transport.writes, trailer]))
    text = zlib.decompress(body, 31)  # a whole member: the CRC-32 and length check
    lines = [orjson.loads(line) for line in text.splitlines() if line]
    e = epoch(hub, "a")
    assert lines == [
        {"channel": "a", "id": 1, "ts": lines[0]["ts"], "data": {"t": 21.5, "device": "th-1"}}
        | {"cursor": f"a:{e}:1"},
        {"channel": "a", "id": 2, "ts": lines[1]["ts"], "data": {"t": 21.6, "device": "th-1"}}
        | {"cursor": f"a:{e}:2"},
        {"type": "reconnect", "cursor": f"a:{e}:2"},
    ]


def inflate_messages(writes: list[bytes], takeover: bool = True) -> list[bytes]:
    """Compressed WebSocket text frames (RSV1) inflated with context takeover (or each with a
    fresh window)."""
    decoder = zlib.decompressobj(-15)
    messages = []
    for data in writes:
        while data:
            assert data[0] == 0xC1, data[:2]  # FIN, RSV1, text
            n = data[1]
            assert n < 126
            if not takeover:
                decoder = zlib.decompressobj(-15)
            messages.append(decoder.decompress(data[2 : 2 + n] + SYNC_TAIL))
            data = data[2 + n :]
    return messages


async def test_websocket_messages_are_deflated_one_by_one_and_lone_ones_stand_alone(hub):
    twin = WEBSOCKET.compressed()
    assert twin.coding is not None
    chained = FakeStream(await start(hub, ["a"]), FakeTransport(), twin, Receiver(twin.coding))
    lone = FakeStream(await start(hub, ["a"]), FakeTransport(), twin, LoneReceiver(twin.coding))
    for sub in (chained, lone):
        hub.attach(sub)
    await hub.publish([("a", b'{"home":1,"away":0}'), ("a", b'{"home":1,"away":1}')])

    scores = [{"home": 1, "away": 0}, {"home": 1, "away": 1}]
    got = inflate_messages(chained.transport.writes)
    assert [orjson.loads(m)["data"] for m in got] == scores
    alone = inflate_messages(lone.transport.writes, takeover=False)
    assert [orjson.loads(m)["data"] for m in alone] == scores
    assert len(chained.transport.writes[0]) < len(lone.transport.writes[0])


async def test_the_compact_framing_sends_a_kept_message_payload_alone(hub):
    kept = Message.kept("news", "e1", 3, 1.5, 7, Message("news", "e1", 3, 1.5, b'{"a":"b"}').head)
    fresh = Message("news", "e1", 3, 1.5, b'{"a":"b"}')
    assert kept.payload == fresh.payload == b'{"a":"b"}'
    cursor = b"news:e1:3"
    frames = frame_events(SSE_COMPACT, [kept], [kept.body(cursor)], [cursor])
    assert frames == [b'id: news:e1:3\nevent: news\ndata: {"a":"b"}\n\n']
    assert frame_events(SSE, [kept], [kept.body(cursor)], [cursor]) == [
        SSE.event(kept.body(cursor), cursor)
    ]


def test_an_answer_builds_each_wrapped_form_once():
    calls: list[str] = []

    def plain(body: bytes) -> bytes:
        calls.append("plain")
        return b"P" + body

    def gzip(body: bytes) -> bytes:
        calls.append("gzip")
        return b"G" + body

    answer = Answer(b"x", 1)
    forms = [answer.wrapped(w) for w in (plain, gzip, plain, gzip, gzip)]
    assert forms == [b"Px", b"Gx", b"Px", b"Gx", b"Gx"]
    assert calls == ["plain", "gzip"]


async def test_a_multi_channel_stream_gets_its_own_frames_deflated_for_it(hub):
    sub = await gzip_stream(hub, ["a", "b"])
    await hub.publish([("a", b'{"n":1}'), ("b", b'{"n":2}')])
    await hub.publish([("b", b'{"n":3}')])
    lines = [orjson.loads(line) for line in b"".join(decoded(sub)).splitlines() if line]
    assert [(m["channel"], m["data"]["n"]) for m in lines] == [("a", 1), ("b", 2), ("b", 3)]
    e, eb = epoch(hub, "a"), epoch(hub, "b")
    assert lines[-1]["cursor"] == f"a:{e}:1,b:{eb}:2"
