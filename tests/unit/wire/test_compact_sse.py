"""The compact SSE framing (`?compact=1`): a message's cursor in `id:`, its channel in `event:`,
its payload alone in `data:`; what an EventSource makes of it, read with the standard's rules."""

from __future__ import annotations

import orjson
import pytest

from pushserver.wire.framing import (
    NDJSON,
    SSE,
    SSE_COMPACT,
    SSE_COMPACT_PLAIN,
    SSE_PLAIN,
    WEBSOCKET,
)

CURSOR = b"news:70f05dee1:17"
DATA = b'{"title":"hi","n":17}'
BODY = b'{"channel":"news","id":17,"ts":1795375692.833052,"data":%b,"cursor":"%b"}' % (
    DATA,
    CURSOR,
)


def dispatched(stream: bytes) -> list[tuple[str, str, str]]:
    """(type, data, lastEventId) of each event an EventSource dispatches from `stream`, by
    the HTML standard's parsing rules (the fields this server sends)."""
    events, data, kind, last_id = [], [], "", ""
    for line in stream.decode().split("\n"):
        if not line:
            if data:
                events.append((kind or "message", "\n".join(data), last_id))
            data, kind = [], ""
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            kind = value
        elif field == "id":
            last_id = value
    return events


def test_a_message_goes_as_its_parts():
    frame = SSE_COMPACT.message(BODY, CURSOR, b"news", DATA)
    assert frame == b"id: news:70f05dee1:17\nevent: news\ndata: " + DATA + b"\n\n"
    assert dispatched(frame) == [("news", DATA.decode(), CURSOR.decode())]
    assert len(frame) < len(SSE.message(BODY, CURSOR, b"news", DATA)) - 60


def test_a_multi_channel_cursor_goes_whole_in_the_id():
    cursor = b"news:70f05dee1:17,sports:u1:0"
    frame = SSE_COMPACT.message(BODY, cursor, b"news", DATA)
    assert dispatched(frame) == [("news", DATA.decode(), cursor.decode())]


def test_control_events_keep_the_envelope_as_message_events():
    gap = b'{"type":"gap","channel":"news","from":3,"to":5,"reason":"expired","cursor":"c"}'
    assert SSE_COMPACT.event(gap, b"c") == SSE.event(gap, b"c")
    reconnect = b'{"type":"reconnect","cursor":"c"}'
    assert dispatched(SSE_COMPACT.event(reconnect, None)) == [("message", reconnect.decode(), "")]


def test_a_channel_called_message_keeps_the_envelope():
    """Its events would be `message` events, which carry envelopes and control events."""
    body = BODY.replace(b'"news"', b'"message"')
    frame = SSE_COMPACT.message(body, b"message:70f05dee1:17", b"message", DATA)
    assert frame == SSE.event(body, b"message:70f05dee1:17")
    assert orjson.loads(dispatched(frame)[0][1])["channel"] == "message"


def test_heartbeats_and_the_start_are_those_of_sse():
    assert SSE_COMPACT.comment(b"") == SSE.comment(b"")
    assert SSE_COMPACT.start(CURSOR) == SSE.start(CURSOR)
    assert dispatched(SSE_COMPACT.start(CURSOR)) == []


@pytest.mark.parametrize("framing", [NDJSON, SSE, SSE_PLAIN, WEBSOCKET])
def test_other_framings_send_a_message_as_its_envelope(framing):
    assert framing.message(BODY, CURSOR, b"news", DATA) == framing.event(BODY, CURSOR)


def test_the_compact_framing_is_sses_transport_chunked_or_not():
    assert SSE_COMPACT.name == SSE_COMPACT_PLAIN.name == "sse"
    assert SSE_COMPACT.chunked and not SSE_COMPACT_PLAIN.chunked
