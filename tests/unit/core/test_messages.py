"""The envelope a message is encoded to once, and the gap and control events."""

from __future__ import annotations

import math
import random

import orjson

from pushserver.core.messages import Gap, Message, control, ts_json
from pushserver.core.names import is_channel


def test_envelope_bytes_are_the_protocols_with_the_cursor_last():
    m = Message("news", "E1", 17, 1763800000.123, b'{"k":[1,2]}')
    assert m.position == "news:E1:17"
    assert m.body(b"news:E1:17") == (
        b'{"channel":"news","id":17,"ts":1763800000.123,"data":{"k":[1,2]},"cursor":"news:E1:17"}'
    )


def test_one_head_serves_any_cursor():
    m = Message("a", "E", 3, 10.0, b'"text"')
    for cursor in (b"a:E:3", b"a:E:3,b:F:9"):
        assert orjson.loads(m.body(cursor)) == {
            "channel": "a",
            "id": 3,
            "ts": 10.0,
            "data": "text",
            "cursor": cursor.decode(),
        }


def test_a_channel_name_is_its_own_json_string():
    """The envelope writes a channel's name between quotes as it is, unescaped: true of every
    character a name may hold (`core.names`), and of none that JSON escapes. A name rule that
    let in a quote, a backslash or a control character fails here."""
    allowed = [c for c in map(chr, range(0x3000)) if is_channel(c)]
    assert allowed, "some character is a name"
    for c in allowed:
        assert orjson.dumps(c) == b'"%b"' % c.encode()
        m = Message(c * 3, "E", 1, 10.0, b"1")
        assert orjson.loads(m.body(b""))["channel"] == c * 3


def test_ts_is_rounded_to_microseconds():
    m = Message("a", "E", 1, 1763800000.123456789, b"null")
    assert orjson.loads(m.body(b"a:E:1"))["ts"] == 1763800000.123457


def test_ts_is_written_as_orjson_wrote_it_rounded():
    """`ts_json` is `orjson.dumps(round(ts, 6))` byte for byte: times of this era (one decimal
    conversion), at and around whole seconds, ties and their neighbours, and times outside the
    range it formats itself."""
    rnd = random.Random(35)
    times = [rnd.uniform(1.0, 2.0**33) for _ in range(20_000)]
    times += [rnd.uniform(1.7e9, 1.9e9) for _ in range(20_000)]
    times += [1.0, 10.0, 1763800000.0, 1763800000.5, 2.0**33 - 1e-6, 2.0**33, 1e20]
    times += [0.0, 1e-6, 5e-7, 0.1234567, 0.99999999]
    for micros in range(1_795_000_000_000_000, 1_795_000_000_000_400):
        tie = micros / 1e6 + 5e-7
        times += [tie, math.nextafter(tie, 0.0), math.nextafter(tie, math.inf)]
    for power in range(35):  # ties in every binade: below 2**13 a fraction times 10**6 rounds
        for micros in [0, 999_999, *(rnd.randrange(1_000_000) for _ in range(300))]:
            tie = 2.0**power + micros / 1e6 + 5e-7
            times += [tie, math.nextafter(tie, 0.0), math.nextafter(tie, math.inf)]
    for ts in times:
        assert ts_json(ts) == orjson.dumps(round(ts, 6)), ts


def test_gap_body_names_the_missed_ids_the_reason_and_the_cursor():
    gap = Gap("news", 3, 9, "expired", "news:E1:9")
    assert gap.body(b"news:E1:9") == (
        b'{"type":"gap","channel":"news","from":3,"to":9,"reason":"expired","cursor":"news:E1:9"}'
    )


def test_gaps_sort_before_the_messages_of_a_backlog():
    m = Message("a", "E", 1, 1.0, b"1")
    m.seq = 1
    events = [m, Gap("b", 1, 4, "epoch", "b:F:4")]
    assert sorted(events, key=lambda e: e.seq)[0].channel == "b"


def test_control_events_are_compact_json():
    assert control({"type": "reconnect", "cursor": "a:E:1"}) == (
        b'{"type":"reconnect","cursor":"a:E:1"}'
    )


def test_the_publishers_receipt_is_the_envelopes_start_as_the_json_it_was():
    """A publisher's 201 is cut from the envelope: byte for byte what `orjson.dumps` gave of the
    receipt's fields (ts rounded to microseconds), whatever the data holds, a kept message's
    too."""
    cases = [
        Message("a.b:c@d-e_1", "E7", 9, 1795769952.6223391, b'{"x":",\\"data\\":1"}'),
        Message("n", "E", 1, 10.0, b'",\\"data\\":"'),
        Message("q" * 128, "E", 2**40, 0.1234567, b"[]"),
    ]
    cases.append(Message.kept("k", "E", 4, 3.5, 1, Message("k", "E", 4, 3.5, b"[1]").head))
    for m in cases:
        for subscribers in (0, 1, 20_000):
            want = {"channel": m.channel, "id": m.id, "ts": round(m.ts, 6)}
            assert m.receipt(subscribers) == orjson.dumps({**want, "subscribers": subscribers})
