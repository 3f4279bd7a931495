"""The bytes each framing puts on the wire, chunked transfer, and the long-poll body."""

from __future__ import annotations

import orjson
import pytest

from pushserver.wire.framing import (
    NDJSON,
    NDJSON_PLAIN,
    SSE,
    SSE_PLAIN,
    WEBSOCKET,
    longpoll_body,
)

BODY = b'{"channel":"a","id":1,"data":2,"cursor":"a:e:1"}'


def test_ndjson_is_one_line_per_event_and_a_blank_line_for_a_heartbeat():
    assert NDJSON.event(BODY, b"a:e:1") == BODY + b"\n"
    assert NDJSON.comment(b"") == b"\n"
    assert NDJSON.comment(b"   ") == b"   \n"


def test_sse_carries_the_cursor_as_the_event_id():
    assert SSE.event(BODY, b"a:e:1") == b"id: a:e:1\ndata: " + BODY + b"\n\n"
    assert SSE.event(b'{"type":"reconnect"}', None) == b'data: {"type":"reconnect"}\n\n'
    assert SSE.comment(b"") == b":\n\n"


def test_only_sse_tells_where_a_stream_starts():
    """An `id:` with no `data:`: EventSource keeps it as its last id and dispatches nothing."""
    assert SSE.start(b"a:e:0,b:u1:0") == b"id: a:e:0,b:u1:0\n\n"
    assert NDJSON.start(b"a:e:0") == b""


def test_websocket_events_are_text_frames():
    """Frame lengths are `wire.websocket`'s to test; the framing sends every event as text."""
    assert WEBSOCKET.event(b"{}", b"a:e:1") == b"\x81\x02{}"


def test_websocket_heartbeat_is_an_empty_ping():
    assert WEBSOCKET.comment(b"") == b"\x89\x00"


@pytest.mark.parametrize("framing", [NDJSON, SSE])
def test_chunked_framings_wrap_in_http_chunks(framing):
    for payload in (b"x", b"y" * 255, b"z" * 4096):
        chunk = framing.chunk(payload)
        size, _, rest = chunk.partition(b"\r\n")
        assert size == b"%x" % len(payload) and rest == payload + b"\r\n"


@pytest.mark.parametrize("framing", [NDJSON_PLAIN, SSE_PLAIN, WEBSOCKET])
def test_plain_framings_write_the_bytes_as_they_are(framing):
    assert framing.chunk(b"abc") == b"abc"


def test_framings_are_named_for_their_transport():
    names = [f.name for f in (NDJSON, NDJSON_PLAIN, SSE, SSE_PLAIN, WEBSOCKET)]
    assert names == ["stream", "stream", "sse", "sse", "ws"]


def test_longpoll_body_lists_the_envelopes_and_the_cursor():
    assert longpoll_body([], "a:e:0") == b'{"messages":[],"cursor":"a:e:0"}'
    body = longpoll_body([BODY, BODY.replace(b"1", b"2")], "a:e:2,b:f:0")
    assert orjson.loads(body) == {
        "messages": [orjson.loads(BODY), orjson.loads(BODY.replace(b"1", b"2"))],
        "cursor": "a:e:2,b:f:0",
    }
