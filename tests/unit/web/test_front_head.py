"""Request heads as the front end reads them, one reused parser for heads of every kind."""

from __future__ import annotations

import pytest

from pushserver.web.http.parser import HeadError, HeadParser

HEADS = [
    # (head, method, path, version, keep_alive, body_length)
    (
        b"GET /lp/a?timeout=0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "GET",
        "/lp/a",
        "1.1",
        False,
        0,
    ),
    (b"GET /stream/a HTTP/1.1\r\nHost: x\r\n\r\n", "GET", "/stream/a", "1.1", True, 0),
    (b"GET /lp/a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "GET", "/lp/a", "1.0", True, 0),
    (b"GET /lp/a HTTP/1.0\r\n\r\n", "GET", "/lp/a", "1.0", False, 0),
    (
        b"GET /ws/a HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        "GET",
        "/ws/a",
        "1.1",
        True,
        0,
    ),
    (
        b"POST /pub/a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n",
        "POST",
        "/pub/a",
        "1.1",
        True,
        4,
    ),
    (
        b"POST /pub HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST",
        "/pub",
        "1.1",
        True,
        -1,
    ),
    (b"GET /sse/a%3Ab HTTP/1.1\r\nHost: x\r\n\r\n", "GET", "/sse/a:b", "1.1", True, 0),
    # The absolute form is served as its path (RFC 9112 section 3.2.2).
    (b"GET http://x/lp/a?timeout=0 HTTP/1.1\r\nHost: x\r\n\r\n", "GET", "/lp/a", "1.1", True, 0),
    (b"GET HTTPS://x:8080 HTTP/1.1\r\nHost: x:8080\r\n\r\n", "GET", "/", "1.1", True, 0),
    (b"GET /lp/a HTTP/1.0\r\nHost: [::1]:80\r\n\r\n", "GET", "/lp/a", "1.0", False, 0),
    (b"GET /lp/a HTTP/1.1\r\nHost:\r\n\r\n", "GET", "/lp/a", "1.1", True, 0),
    # The asterisk form names the server as a whole, for OPTIONS only (RFC 9112 section 3.2.4).
    (b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", "OPTIONS", "*", "1.1", True, 0),
    (b"HEAD /sse/a HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD", "/sse/a", "1.1", True, 0),
]


def test_heads_of_every_kind_in_a_row_on_one_parser() -> None:
    parser = HeadParser(8190, 8190, 64)
    for _ in range(2):
        for raw, method, path, version, keep_alive, body_length in HEADS:
            head = parser.parse(raw)
            got = (head.method, head.path, head.version, head.keep_alive, head.body_length)
            assert got == (method, path, version, keep_alive, body_length), raw
            assert head.size == len(raw)


def test_query_and_headers() -> None:
    head = HeadParser(8190, 8190, 64).parse(
        b"GET /lp/a?cursor=x%2Cy&cursor=z&cb=a+b&flag HTTP/1.1\r\nHost: x\r\n"
        b"X-Forwarded-For: 10.0.0.1\r\nx-forwarded-for: 10.0.0.2\r\nOrigin: https://o\r\n\r\n"
    )
    assert head.query == {"cursor": "x,y", "cb": "a b", "flag": ""}
    assert head.headers == {
        "host": "x",
        "x-forwarded-for": "10.0.0.1, 10.0.0.2",
        "origin": "https://o",
    }
    assert head.target == "/lp/a?cursor=x%2Cy&cursor=z&cb=a+b&flag"


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET /" + b"a" * 100 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100 + b"\r\n\r\n", 431),
        (b"NOT HTTP\r\n\r\n", 400),
        (b"GET elsewhere/ HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET ftp://elsewhere/ HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"HEAD * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"OPTIONS *x HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: a\r\nauthorization: a\r\n\r\n", 400),
        (
            b"POST /pub/a HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k\r\nIdempotency-Key: j\r\n\r\n",
            400,
        ),
        # RFC 9112 section 3.2: Host is required in HTTP/1.1, and must be a host.
        (b"GET /lp/a HTTP/1.1\r\n\r\n", 400),
        (b"GET /lp/a HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        (b"GET /lp/a HTTP/1.0\r\nHost: \xe9\r\n\r\n", 400),
        (b"GET /lp/a HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        (b"GET /lp/a\r\n\r\n", 505),
        (b"POST /pub/a HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n", 417),
        (b"POST /pub/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
    ],
)
def test_refused_heads_leave_the_parser_usable(raw: bytes, status: int) -> None:
    parser = HeadParser(64, 64, 64)
    with pytest.raises(HeadError) as caught:
        parser.parse(raw)
    assert caught.value.status == status
    assert parser.parse(b"GET /lp/a HTTP/1.1\r\nHost: x\r\n\r\n").path == "/lp/a"
