"""RFC 6455 conformance of the held WebSocket, against a real server.

The case table follows the sections of the Autobahn TestSuite: 1 payload lengths, 2 pings and
pongs, 3 reserved bits, 4 reserved opcodes, 5 fragmentation, 6 UTF-8, 7 close handling, 9 large
frames and byte-by-byte delivery. Each row is the bytes a client sends (one write per piece) and
the frames the server must answer with. Then the connection must end with a close: if the
server has not closed, the client closes with 1000 and expects it back. After the close a
message is published to the row's channel, and nothing but the close may arrive before EOF.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from typing import NamedTuple

import aiohttp
import pytest

from pushserver.launcher import ServerProcess

from ...wire import (
    BINARY,
    CLOSE,
    CONT,
    PING,
    PONG,
    TEXT,
    WS_DEADLINE,
    masked,
    open_ws,
    publish,
    read_frame,
    wait_for_subscribers,
    ws_upgrade,
)

Frame = tuple[int, bytes]


class Case(NamedTuple):
    id: str
    send: list[bytes]
    """Written one piece at a time."""
    expect: list[Frame]
    """What the server answers, a close by its code only."""


def code(n: int, reason: bytes = b"") -> bytes:
    return struct.pack("!H", n) + reason


def pong(payload: bytes = b"") -> Frame:
    return PONG, payload


def closed(n: int) -> Frame:
    return CLOSE, code(n)


def ping(payload: bytes = b"") -> bytes:
    return masked(PING, payload)


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def section1() -> Iterator[Case]:
    for opcode, kind in ((TEXT, "text"), (BINARY, "binary")):
        for size in (0, 125, 126, 127, 65535, 65536):
            data = masked(opcode, b"*" * size) + ping(b"alive")
            yield Case(f"1-{kind}-{size}", [data], [pong(b"alive")])


def section2() -> Iterator[Case]:
    binary = bytes(range(8)) + b"\xfe\xff"
    ten = [pong(b"%d" % i) for i in range(10)]
    yield Case("2.1-ping-empty", [ping()], [pong()])
    yield Case("2.2-ping-text", [ping(b"Hello, world!")], [pong(b"Hello, world!")])
    yield Case("2.3-ping-binary", [ping(binary)], [pong(binary)])
    yield Case("2.4-ping-125", [ping(b"*" * 125)], [pong(b"*" * 125)])
    yield Case("2.5-ping-126", [masked(PING, b"*" * 126) + ping(b"after")], [closed(1002)])
    yield Case("2.6-ping-125-bytewise", bytewise(ping(b"*" * 125)), [pong(b"*" * 125)])
    yield Case("2.7-unsolicited-pong", [masked(PONG, b"") + ping(b"p")], [pong(b"p")])
    yield Case("2.8-unsolicited-pong-payload", [masked(PONG, b"x" * 125)], [])
    yield Case("2.9-pong-then-ping", [masked(PONG, b"q") + ping(b"p")], [pong(b"p")])
    yield Case("2.10-ten-pings", [b"".join(ping(b"%d" % i) for i in range(10))], ten)
    pings = b"".join(ping(b"%d" % i) for i in range(10))
    yield Case("2.11-ten-pings-bytewise", bytewise(pings), ten)


def section3() -> Iterator[Case]:
    ok = masked(TEXT, b"fine")
    rows = [(1, TEXT), (2, TEXT), (3, TEXT), (4, TEXT), (5, BINARY), (6, PING), (7, CLOSE)]
    for rsv, opcode in rows:
        payload = code(1000) if opcode == CLOSE else b"x"
        data = ok + masked(opcode, payload, rsv=rsv) + ping(b"after")
        yield Case(f"3-rsv{rsv}-op{opcode}", [data], [closed(1002)])


def section4() -> Iterator[Case]:
    for opcode in (3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF):
        data = masked(TEXT, b"fine") + masked(opcode, b"x") + ping(b"after")
        yield Case(f"4-opcode-{opcode:#x}", [data], [closed(1002)])


def section5() -> Iterator[Case]:
    frag = masked(TEXT, b"frag", fin=False)
    last = masked(CONT, b"ment")
    yield Case(
        "5.1-fragmented-ping", [masked(PING, b"a", fin=False) + masked(CONT, b"b")], [closed(1002)]
    )
    yield Case(
        "5.2-fragmented-pong", [masked(PONG, b"a", fin=False) + masked(CONT, b"b")], [closed(1002)]
    )
    yield Case("5.3-text-two-fragments", [frag + last + ping(b"p")], [pong(b"p")])
    yield Case("5.4-fragments-separate-writes", [frag, last, ping(b"p")], [pong(b"p")])
    yield Case("5.5-fragments-bytewise", bytewise(frag + last + ping(b"p")), [pong(b"p")])
    yield Case("5.6-ping-between-fragments", [frag + ping(b"mid") + last], [pong(b"mid")])
    yield Case("5.7-ping-between-separate", [frag, ping(b"mid"), last], [pong(b"mid")])
    yield Case("5.8-ping-between-bytewise", bytewise(frag + ping(b"mid") + last), [pong(b"mid")])
    yield Case("5.9-continuation-no-start", [masked(CONT, b"x") + ping(b"p")], [closed(1002)])
    yield Case("5.10-continuation-no-start-nofin", [masked(CONT, b"x", fin=False)], [closed(1002)])
    yield Case(
        "5.11-stray-continuation-then-text", [masked(CONT, b"x") + frag + last], [closed(1002)]
    )
    yield Case("5.12-text-inside-text", [frag + masked(TEXT, b"x") + ping(b"p")], [closed(1002)])
    yield Case("5.13-binary-inside-text", [frag + masked(BINARY, b"x")], [closed(1002)])
    yield Case("5.14-continuation-after-end", [frag + last + masked(CONT, b"x")], [closed(1002)])
    yield Case(
        "5.15-pong-between-fragments", [frag + masked(PONG, b"") + last + ping(b"p")], [pong(b"p")]
    )
    many = masked(BINARY, b"a", fin=False) + masked(CONT, b"b", fin=False) * 50 + last
    yield Case("5.16-binary-52-fragments", [many + ping(b"p")], [pong(b"p")])
    bye = masked(CLOSE, code(1001, b"bye"))
    yield Case("5.17-close-between-fragments", [frag + bye + last], [closed(1001)])
    yield Case("5.18-close-between-separate", [frag, bye], [closed(1001)])
    yield Case("5.19-close-between-bytewise", bytewise(frag + bye), [closed(1001)])


HELLO = "Hello-µ@ßöäüàá-UTF-8!!".encode()
INVALID = [
    ("surrogate", b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited"),
    ("overlong-slash", b"\xc0\xaf"),
    ("overlong-nul", b"\xe0\x80\x80"),
    ("above-10ffff", b"\xf4\x90\x80\x80"),
    ("ff-byte", b"\xff"),
    ("lone-continuation", b"\x80"),
    ("truncated-at-end", b"ok\xce"),
]


def section6() -> Iterator[Case]:
    yield Case("6.1-empty-text", [masked(TEXT, b"") + ping(b"p")], [pong(b"p")])
    empty = masked(TEXT, b"", fin=False) + masked(CONT, b"", fin=False) + masked(CONT, b"")
    yield Case("6.1-empty-fragments", [empty + ping(b"p")], [pong(b"p")])
    yield Case("6.2-valid-utf8", [masked(TEXT, HELLO) + ping(b"p")], [pong(b"p")])
    pieces = [masked(TEXT, HELLO[:1], fin=False)]
    pieces += [masked(CONT, HELLO[i : i + 1], fin=False) for i in range(1, len(HELLO) - 1)]
    pieces += [masked(CONT, HELLO[-1:]), ping(b"p")]
    yield Case("6.2-valid-one-byte-fragments", [b"".join(pieces)], [pong(b"p")])
    for name, char in (("ffff", b"\xef\xbf\xbf"), ("10ffff", b"\xf4\x8f\xbf\xbf")):
        yield Case(f"6.3-valid-{name}", [masked(TEXT, char) + ping(b"p")], [pong(b"p")])
    for name, data in INVALID:
        yield Case(f"6.4-invalid-{name}", [masked(TEXT, data) + ping(b"after")], [closed(1007)])
    bad = b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited"
    split = masked(TEXT, bad[:12], fin=False) + masked(CONT, bad[12:])
    yield Case("6.5-invalid-across-fragments", [split + ping(b"after")], [closed(1007)])
    yield Case("6.5-invalid-fragments-bytewise", bytewise(split), [closed(1007)])
    yield Case(
        "6.5-invalid-then-ping-in-message",
        [masked(TEXT, b"\xff", fin=False) + ping(b"mid") + masked(CONT, b"x")],
        [closed(1007)],
    )


VALID_CODES = (1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999)
INVALID_CODES = (0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535)


def section7() -> Iterator[Case]:
    bye = masked(CLOSE, code(1000))
    yield Case("7.1.1-close", [bye], [closed(1000)])
    yield Case("7.1.2-close-twice", [bye + bye], [closed(1000)])
    yield Case("7.1.3-ping-after-close", [bye + ping(b"after")], [closed(1000)])
    yield Case("7.1.4-text-after-close", [bye + masked(TEXT, b"after")], [closed(1000)])
    yield Case("7.1.5-close-separate-writes", [bye, ping(b"after")], [closed(1000)])
    yield Case("7.3.1-close-empty", [masked(CLOSE, b"")], [(CLOSE, b"")])
    yield Case("7.3.2-close-one-byte", [masked(CLOSE, b"\x03")], [closed(1002)])
    yield Case("7.3.4-close-reason", [masked(CLOSE, code(1000, b"Hello World!"))], [closed(1000)])
    yield Case("7.3.5-close-reason-123", [masked(CLOSE, code(1000, b"*" * 123))], [closed(1000)])
    yield Case("7.3.6-close-reason-124", [masked(CLOSE, code(1000, b"*" * 124))], [closed(1002)])
    yield Case(
        "7.5.1-close-reason-invalid-utf8",
        [masked(CLOSE, code(1000, b"\xce\xba\xff"))],
        [closed(1007)],
    )
    for n in VALID_CODES:
        yield Case(f"7.7-valid-code-{n}", [masked(CLOSE, code(n))], [closed(n)])
    for n in INVALID_CODES:
        yield Case(
            f"7.9-invalid-code-{n}", [masked(CLOSE, code(n)) + ping(b"after")], [closed(1002)]
        )


def section9() -> Iterator[Case]:
    big = 65537
    head_text = struct.pack("!BBQ", 0x81, 0xFF, big) + b"\x00\x00\x00\x00" + b"*" * 1024
    head_bin = struct.pack("!BBQ", 0x82, 0xFF, big) + b"\x00\x00\x00\x00" + b"*" * 1024
    yield Case("9.1-text-over-64k", [head_text], [closed(1009)])
    yield Case("9.2-binary-over-64k", [head_bin], [closed(1009)])
    huge = struct.pack("!BBQ", 0x82, 0xFF, 1 << 40) + b"\x00\x00\x00\x00"
    yield Case("9.3-binary-1-tib-announced", [huge], [closed(1009)])
    top_bit = struct.pack("!BBQ", 0x82, 0xFF, 1 << 63) + b"\x00\x00\x00\x00"
    yield Case("9.3-length-top-bit-set", [top_bit], [closed(1002)])
    yield Case(
        "9.4-non-minimal-16bit", [masked(TEXT, b"abc", width=2) + ping(b"after")], [closed(1002)]
    )
    yield Case("9.4-non-minimal-64bit", [masked(BINARY, b"x" * 200, width=8)], [closed(1002)])
    parts = masked(BINARY, b"a" * 40000, fin=False) + masked(CONT, b"b" * 40000)
    yield Case("9.5-message-over-64k-in-fragments", [parts + ping(b"p")], [pong(b"p")])
    four = masked(TEXT, b"*" * 65536) * 4
    yield Case("9.6-four-64k-frames", [four + ping(b"p")], [pong(b"p")])
    pings = b"".join(ping(b"%d" % (i % 10)) for i in range(1000))
    yield Case("9.7-1000-pings", [pings], [pong(b"%d" % (i % 10)) for i in range(1000)])
    yield Case(
        "9.8-64k-frame-bytewise", bytewise(masked(BINARY, b"*" * 65536) + ping(b"p")), [pong(b"p")]
    )


CASES = [
    *section1(),
    *section2(),
    *section3(),
    *section4(),
    *section5(),
    *section6(),
    *section7(),
    *section9(),
]


@pytest.fixture(scope="module")
def quiet_server() -> Iterator[ServerProcess]:
    """No heartbeats: every frame a row receives is an answer to what it sent."""
    with ServerProcess(["--heartbeat", "3600"]) as srv:
        yield srv


def brief(frame: Frame) -> Frame:
    """A close by its code only, after checking its reason is UTF-8 (§5.5.1)."""
    opcode, payload = frame
    if opcode == CLOSE:
        payload[2:].decode()
        return opcode, payload[:2]
    return frame


async def converse(srv: ServerProcess, case: Case, channel: str) -> tuple[list[Frame], bytes]:
    """Run one row: the frames the server answered with, and what came after the close."""
    reader, writer = await open_ws(srv.port, f"/ws/{channel}")
    async with aiohttp.ClientSession() as session:
        await wait_for_subscribers(session, srv.url, channel, 1)
        for piece in case.send:
            writer.write(piece)
            await writer.drain()
        got: list[Frame] = []
        while len(got) < len(case.expect) and CLOSE not in (op for op, _ in got):
            got.append(brief(await read_frame(reader)))
        if CLOSE not in (op for op, _ in got):
            writer.write(masked(CLOSE, code(1000)))
            got.append(brief(await read_frame(reader)))
        await publish(session, srv.url, channel, "published after the close")
        rest = await asyncio.wait_for(reader.read(), WS_DEADLINE)
    writer.close()
    return got, rest


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_rfc6455_case(quiet_server: ServerProcess, case: Case) -> None:
    channel = "rfc." + case.id.replace("~", "-")
    got, rest = await converse(quiet_server, case, channel)
    expect = case.expect
    if CLOSE not in (op for op, _ in expect):
        expect = [*expect, closed(1000)]
    assert got == expect
    assert rest == b"", "nothing but the close may come before EOF"


@pytest.mark.parametrize("version", ["8", "12", "14", ""])
async def test_an_unsupported_version_is_refused_naming_13(quiet_server, version) -> None:
    async with aiohttp.ClientSession() as session:
        headers = dict(line.split(": ", 1) for line in ws_upgrade(version=version).splitlines())
        async with session.get(f"{quiet_server.url}/ws/rfc.version", headers=headers) as r:
            assert r.status == 400
            assert r.headers["Sec-WebSocket-Version"] == "13"


@pytest.mark.parametrize(
    ("upgrade", "status"),
    [("h2c, WebSocket", b"101"), ("websocket , h2c", b"101"), ("h2c", b"400"), ("", b"400")],
)
async def test_upgrade_is_a_list_that_must_name_websocket(quiet_server, upgrade, status) -> None:
    """RFC 9110 section 7.8: `Upgrade` lists protocols; RFC 6455 section 4.2.1: it must
    include websocket."""
    reader, writer = await asyncio.open_connection("127.0.0.1", quiet_server.port)
    handshake = ws_upgrade().replace("Upgrade: websocket", f"Upgrade: {upgrade}")
    writer.write(f"GET /ws/rfc.upgrade HTTP/1.1\r\nHost: x\r\n{handshake}\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WS_DEADLINE)
    writer.close()
    assert head.split(b" ", 2)[1] == status, head
