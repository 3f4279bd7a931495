"""`pushserver.wire.compression` against zlib's own decoder and RFC 7692's examples: every
schedule of shared frames, frames of one connection and heartbeats decodes to exactly what was
sent, each frame as soon as its blocks arrive, with a trailer zlib checks."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.frames import Frame, Opcode

from pushserver.wire.compression import (
    FINAL_BLOCK,
    GZIP_HEADER,
    SYNC_TAIL,
    WINDOW_BITS,
    Accepted,
    Chain,
    Coding,
    Deflated,
    GzipStream,
    Receiver,
    accept_permessage_deflate,
    deflate,
    gzip_body,
    inbound_deflate,
    permessage_deflate,
)
from pushserver.wire.framing import NDJSON, SSE
from pushserver.wire.websocket import TEXT, ws_frame

SSE_CODING = Coding(SSE.chunk, SSE.comment(b""))
RAW_SSE = Coding(lambda block: block, SSE.comment(b""))
"""The SSE coding without chunked transfer, so the bytes are the content coding alone."""


def envelope(channel: str, n: int) -> bytes:
    return SSE.event(
        b'{"channel":"%b","id":%d,"ts":1795375692.%06d,"data":{"price":%d.25},'
        b'"cursor":"%b:70f05dee1:%d"}'
        % (channel.encode(), n, n * 7919 % 10**6, 180 + n % 7, channel.encode(), n),
        b"%b:70f05dee1:%d" % (channel.encode(), n),
    )


def inflate_raw(*blocks: bytes) -> bytes:
    decoder = zlib.decompressobj(-15)
    return b"".join(decoder.decompress(block) for block in blocks)


# -- one frame ------------------------------------------------------------------------------


def test_a_frame_alone_is_sync_flushed_and_refers_to_nothing_before_it():
    one, two = envelope("news", 1), envelope("sports", 2)
    assert deflate(one).endswith(SYNC_TAIL) and deflate(two).endswith(SYNC_TAIL)
    assert inflate_raw(deflate(one)) == one
    assert inflate_raw(deflate(one), deflate(two)) == one + two
    assert inflate_raw(deflate(two), deflate(one)) == two + one


def test_a_chained_frame_reads_right_only_after_the_frame_it_was_made_against():
    before, frame = envelope("news", 1), envelope("news", 2)
    chained = deflate(frame, before)
    assert inflate_raw(deflate(before), chained) == before + frame
    assert len(chained) < len(deflate(frame)) / 2
    with pytest.raises(zlib.error):  # its back-references point before the stream began
        inflate_raw(chained)


def test_forms_are_made_once_and_only_when_asked_for():
    frame = Deflated(envelope("news", 2), envelope("news", 1), RAW_SSE)
    assert frame.forms == {}
    assert frame.after(0) is frame.after(0)
    assert frame.alone is frame.alone
    assert set(frame.forms) == {0, -1}
    first = Deflated(envelope("news", 1), None, RAW_SSE)
    assert first.after(0) is first.alone  # nothing before it: one form


def test_a_chain_keeps_frames_by_their_bytes_only():
    chain = Chain(RAW_SSE)
    frames = [chain.add(envelope("news", n)) for n in range(1, 4)]
    assert frames[0].before is None
    assert frames[1].before is frames[0].data and frames[2].before is frames[1].data
    assert chain.last is frames[2].data
    assert not any(isinstance(getattr(f, s), Deflated) for f in frames for s in f.__slots__)


# -- a connection ---------------------------------------------------------------------------


def test_a_receiver_gets_the_chained_form_only_right_after_the_frame_before():
    chain = Chain(RAW_SSE)
    one, two, three = (chain.add(envelope("news", n)) for n in (1, 2, 3))
    fresh, follows, late = Receiver(RAW_SSE), Receiver(RAW_SSE), Receiver(RAW_SSE)
    assert follows.take(one) == one.alone
    assert follows.take(two) == two.after(0)
    assert late.take(two) == two.alone  # joined after `one` went out
    assert fresh.take(three) == three.alone
    assert follows.take(three) == three.after(0)


def test_heartbeats_keep_the_chain():
    chain = Chain(RAW_SSE)
    one, two = chain.add(envelope("news", 1)), chain.add(envelope("news", 2))
    receiver = Receiver(RAW_SSE)
    out = [receiver.take(one), receiver.beat(), receiver.beat(), receiver.take(two)]
    assert out[-1] == two.after(2) != two.after(0)
    assert inflate_raw(*out) == one.data + SSE.comment(b"") * 2 + two.data
    assert len(two.after(2)) < len(two.alone) / 2


def test_a_connections_own_frame_is_chained_to_what_it_got_last():
    chain = Chain(RAW_SSE)
    shared = chain.add(envelope("news", 1))
    receiver = Receiver(RAW_SSE)
    own = envelope("news", 2).replace(b"news:70f05dee1:2", b"news:70f05dee1:2,b:u1:0")
    out = [receiver.take(shared), receiver.own(own)]
    assert inflate_raw(*out) == shared.data + own
    assert len(out[1]) < len(deflate(own)) / 2
    assert receiver.last is own


Step = tuple[str, int]


@st.composite
def schedules(draw: st.DrawFn) -> list[list[Step]]:
    """What each of three connections receives, in order: shared frames of two channels' chains
    (each connection joins a chain at some point and may miss frames, as a subscriber that
    came late or a multi-channel subscription would), frames of its own, heartbeats."""
    steps = st.one_of(
        st.tuples(st.sampled_from(["news", "sports"]), st.integers(0, 11)),
        st.tuples(st.just("own"), st.integers(0, 1000)),
        st.tuples(st.just("beat"), st.just(0)),
    )
    out = []
    for _ in range(3):
        listed = draw(st.lists(steps, max_size=25))
        shared = sorted(s for s in listed if s[0] in ("news", "sports"))
        # shared frames in chain order, the rest where they were drawn
        it = iter(shared)
        out.append([next(it) if s[0] in ("news", "sports") else s for s in listed])
    return out


@settings(max_examples=150, deadline=None)
@given(schedules())
def test_any_schedule_decodes_to_what_was_sent_each_frame_at_once(plan):
    """Every connection's body is one gzip member that zlib decodes (CRC and length checked),
    and a decoder fed the body up to the end of any frame's blocks has that whole frame."""
    chains = {name: Chain(RAW_SSE) for name in ("news", "sports")}
    frames = {
        name: [chain.add(envelope(name, n)) for n in range(12)] for name, chain in chains.items()
    }
    for steps in plan:
        stream = GzipStream(RAW_SSE)
        body, sent = [GZIP_HEADER], []
        decoder = zlib.decompressobj(31)
        decoded = decoder.decompress(GZIP_HEADER)
        for kind, n in steps:
            if kind == "beat":
                block, data = stream.beat(), SSE.comment(b"")
            elif kind == "own":
                data = envelope("own", n)
                block = stream.own(data)
            else:
                frame = frames[kind][n]
                block, data = stream.take(frame), frame.data
            body.append(block)
            sent.append(data)
            decoded += decoder.decompress(block)
            assert decoded == b"".join(sent)  # nothing held back for later bytes
        body.append(stream.end())
        assert zlib.decompress(b"".join(body), 31) == b"".join(sent)


def test_an_empty_stream_is_a_valid_gzip_member():
    stream = GzipStream(RAW_SSE)
    assert zlib.decompress(GZIP_HEADER + stream.end(), 31) == b""
    assert stream.end() == FINAL_BLOCK + struct.pack("<II", 0, 0)


def test_zlib_checks_the_trailer():
    stream = GzipStream(RAW_SSE)
    body = GZIP_HEADER + stream.take(Deflated(envelope("news", 1), None, RAW_SSE))
    end = stream.end()
    for at in (2, 6):  # the CRC-32, the length
        wrong = end[:at] + bytes([end[at] ^ 1]) + end[at + 1 :]
        with pytest.raises(zlib.error, match="incorrect"):
            zlib.decompress(body + wrong, 31)


def test_the_trailer_counts_length_modulo_2_to_the_32():
    stream = GzipStream(RAW_SSE)
    stream.size = (1 << 32) + 5
    assert stream.end()[-4:] == struct.pack("<I", 5)


def test_a_stream_cut_before_its_trailer_has_delivered_everything_it_carried():
    chain, stream = Chain(RAW_SSE), GzipStream(RAW_SSE)
    frames = [chain.add(envelope("news", n)) for n in range(5)]
    body = GZIP_HEADER + b"".join(stream.take(f) for f in frames)
    decoder = zlib.decompressobj(31)
    assert decoder.decompress(body) == b"".join(f.data for f in frames)
    assert not decoder.eof  # the decoder knows the member is unfinished, and loses nothing


def test_chunked_forms_wrap_the_blocks_in_http_chunks():
    frame = Deflated(envelope("news", 2), envelope("news", 1), SSE_CODING)
    size, _, rest = frame.after(0).partition(b"\r\n")
    assert int(size, 16) == len(rest) - 2 and rest.endswith(b"\r\n")
    assert inflate_raw(deflate(frame.before or b""), rest[:-2]) == frame.before + frame.data
    assert SSE_CODING.heartbeat_block == SSE.chunk(deflate(b":\n\n"))
    assert Coding(NDJSON.chunk).heartbeat_block == b""


# -- WebSocket permessage-deflate (RFC 7692) ------------------------------------------------


def test_rfc_7692_hello_without_and_with_context_takeover():
    """§7.2.3.1: "Hello" in one compressed message; §7.2.3.2: the same sent again with the
    window of the first (here: chained to it), a back-reference."""
    assert permessage_deflate(deflate(b"Hello")) == bytes.fromhex("f248cdc9c90700")
    assert permessage_deflate(deflate(b"Hello", b"Hello")) == bytes.fromhex("f200110000")
    framed = ws_frame(0x40 | TEXT, permessage_deflate(deflate(b"Hello")))
    assert framed == bytes.fromhex("c107f248cdc9c90700")


def test_permessage_deflate_refuses_a_block_that_was_not_sync_flushed():
    with pytest.raises(ValueError, match="sync-flushed"):
        permessage_deflate(zlib.compress(b"Hello"))


@pytest.mark.parametrize("missed", [None, 2])
def test_a_websocket_client_with_context_takeover_reads_chained_and_lone_messages(missed):
    """The `websockets` library's client, whose window, like a browser's, takes in every
    message: it reads whichever form the server chose, also after a message it did not get
    (another channel's message in between does the same)."""
    coding = Coding(permessage_deflate)
    chain = Chain(coding)
    frames = [chain.add(envelope("news", n)) for n in range(6)]
    told = [("server_max_window_bits", str(WINDOW_BITS))]
    client = ClientPerMessageDeflateFactory().process_response_params(told, [])
    receiver = Receiver(coding)
    for n, frame in enumerate(frames):
        if n == missed:
            continue
        payload = receiver.take(frame)
        lone = n == 0 or (missed is not None and n == missed + 1)
        assert payload == (frame.alone if lone else frame.after(0))
        assert client.decode(Frame(Opcode.TEXT, payload, rsv1=True)).data == frame.data


# -- one-shot answers -----------------------------------------------------------------------


def test_a_long_poll_answer_is_one_gzip_member():
    body = b'{"messages":[%b],"cursor":"news:70f05dee1:19"}' % b",".join(
        envelope("news", n) for n in range(20)
    )
    packed = gzip_body(body)
    assert packed[:2] == b"\x1f\x8b" and zlib.decompress(packed, 31) == body
    assert len(packed) < len(body) * 0.4


# -- permessage-deflate negotiation ---------------------------------------------------------

ANSWER = f"permessage-deflate; client_no_context_takeover; server_max_window_bits={WINDOW_BITS}"


@pytest.mark.parametrize(
    "offers",
    [
        "permessage-deflate; client_max_window_bits",  # Chromium, Python websockets, Node ws
        "permessage-deflate",  # Firefox, aiohttp
        "permessage-deflate; server_max_window_bits=15",
        "x-webkit-deflate-frame, permessage-deflate",
        "permessage-deflate; server_max_window_bits=8, permessage-deflate",
    ],
)
def test_an_offer_is_answered_with_this_window_and_no_client_context(offers):
    assert accept_permessage_deflate(offers) == Accepted(ANSWER, chained=True)


def test_a_client_that_refuses_context_takeover_gets_every_message_alone():
    accepted = accept_permessage_deflate("permessage-deflate; server_no_context_takeover")
    assert accepted is not None and not accepted.chained
    assert "server_no_context_takeover" in accepted.header


@pytest.mark.parametrize(
    "offers",
    [
        "",
        "x-webkit-deflate-frame",
        "permessage-deflate; server_max_window_bits=9",  # a window below ours
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; unknown=1",
        "permessage-deflate; client_no_context_takeover=yes",
        "permessage-deflate, permessage-deflate;;",
        ";;;",
    ],
)
def test_no_acceptable_offer_means_no_compression(offers):
    assert accept_permessage_deflate(offers) is None


def test_a_clients_compressed_message_is_read_alone():
    """As `client_no_context_takeover` has the client send them: no window kept between."""
    reader = inbound_deflate()
    for text in (b"Hello", b"Hello, again"):
        frame = Frame(Opcode.TEXT, permessage_deflate(deflate(text)), rsv1=True)
        assert reader.decode(frame).data == text
    assert not hasattr(reader, "encoder")  # nothing set up for the server's side
