"""Request bodies as they arrive (`web/http/body.py`): delimited by length or by the last chunk,
cut anywhere, decompressed when gzip or deflate, bounded as published, and what follows them
given back untouched."""

from __future__ import annotations

import gzip
import zlib

import pytest

from pushserver.core.errors import InvalidInput, TooLarge
from pushserver.web.http.body import Body, coding_of

NEXT = b"GET /next HTTP/1.1\r\n\r\n"


def chunked(*chunks: bytes) -> bytes:
    return b"".join(b"%x\r\n%b\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"


def fed(body: Body, data: bytes, piece: int) -> bytes:
    """Feed `data` `piece` bytes at a time; what followed the body."""
    rest = b""
    for at in range(0, len(data), piece):
        rest += body.feed(data[at : at + piece])
    return rest


def raw_deflate(data: bytes) -> bytes:
    deflate = zlib.compressobj(wbits=-15)
    return deflate.compress(data) + deflate.flush()


CASES = [
    ("length", b"hello", 5, None),
    ("chunked", chunked(b"hel", b"lo"), -1, None),
    ("chunk extensions and trailers", b"5;x=1\r\nhello\r\n0\r\nT: 1\r\n\r\n", -1, None),
    ("gzip", gzip.compress(b"hello"), len(gzip.compress(b"hello")), "gzip"),
    ("zlib deflate", zlib.compress(b"hello"), len(zlib.compress(b"hello")), "deflate"),
    ("raw deflate", raw_deflate(b"hello"), len(raw_deflate(b"hello")), "deflate"),
    ("chunked gzip", chunked(*[bytes([b]) for b in gzip.compress(b"hello")]), -1, "gzip"),
]


@pytest.mark.parametrize(
    ("sent", "length", "coding"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
@pytest.mark.parametrize("piece", [1, 2, 7, 1000])
def test_a_body_cut_anywhere_is_read_whole_and_what_follows_is_kept(sent, length, coding, piece):
    body = Body(length, 100, coding)
    assert fed(body, sent + NEXT, piece) == NEXT
    assert body.whole and body.over and body.take() == b"hello"


def test_an_empty_body_is_whole_at_once():
    body = Body(0, 100, "gzip")
    assert body.whole and body.feed(NEXT) == NEXT and body.take() == b""


def test_a_length_over_the_limit_is_refused_before_it_is_read():
    body = Body(101, 100)
    assert body.over and not body.whole
    assert body.feed(b"x" * 101) == b"x" * 101  # nothing taken: the connection closes
    with pytest.raises(TooLarge):
        body.take()


def test_a_chunked_body_growing_past_the_limit_is_refused_as_it_grows():
    body = Body(-1, 10)
    body.feed(chunked(b"x" * 6)[:-5])
    assert not body.over
    body.feed(b"6\r\nxxxxxx\r\n")
    assert body.over and not body.whole
    with pytest.raises(TooLarge):
        body.take()


def test_a_body_inflating_past_the_limit_is_refused_as_it_inflates():
    bomb = gzip.compress(b"x" * 10_000_000)  # about 10 KB sent
    body = Body(-1, 1000, "gzip")
    body.feed(b"%x\r\n%b\r\n" % (len(bomb) // 2, bomb[: len(bomb) // 2]))
    assert body.over and not body.whole and body.size <= 1001  # never held inflated
    with pytest.raises(TooLarge):
        body.take()


@pytest.mark.parametrize(
    ("sent", "coding"),
    [
        (gzip.compress(b"hello")[:-4], "gzip"),
        (b"not gzip at all", "gzip"),
        (b"\x78\x9c", "deflate"),
    ],
    ids=["truncated", "not gzip", "deflate ends early"],
)
def test_a_body_not_valid_for_its_coding_is_refused_once_read(sent, coding):
    body = Body(len(sent), 100, coding)
    assert body.feed(sent + NEXT) == NEXT
    assert body.whole  # all of it read: the connection goes on
    with pytest.raises(InvalidInput) as refused:
        body.take()
    assert refused.value.code == "bad_request"


def test_a_malformed_chunk_is_refused():
    body = Body(-1, 100)
    body.feed(b"zz\r\nhello\r\n")
    assert body.over and not body.whole
    with pytest.raises(InvalidInput):
        body.take()


@pytest.mark.parametrize("piece", [1, 3, 1000])
def test_passed_bytes_are_the_body_as_sent_and_nothing_more(piece):
    sent = b"3\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\n"
    passed: list[bytes] = []
    body = Body(-1, 0, passed=passed.append)
    assert fed(body, sent + NEXT, piece) == NEXT
    assert b"".join(passed) == sent and body.take() == b""
    passed.clear()
    body = Body(5, 0, passed=passed.append)
    assert fed(body, b"hello" + NEXT, piece) == NEXT and b"".join(passed) == b"hello"


@pytest.mark.parametrize(
    ("value", "coding"),
    [(None, None), ("", None), ("identity", None), (" GZip ", "gzip"), ("br", "br")],
)
def test_the_coding_a_header_names(value, coding):
    assert coding_of(value) == coding
