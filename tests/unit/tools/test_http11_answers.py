"""Long-poll answers on a keep-alive connection, decoded by `http11.Responses`."""

from __future__ import annotations

import pytest

from pushserver_measure.http11 import Answer, ConnectionClosed, Responses


def answer(status: str, body: bytes, *headers: str) -> bytes:
    head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def test_answers_back_to_back_and_cut_anywhere() -> None:
    stream = (
        answer("200 OK", b'{"messages":[],"cursor":"a:1:0"}', "Content-Type: application/json")
        + answer("503 Service Unavailable", b"busy", "Retry-After: 2")
        + answer("200 OK", b"{}", "Connection: close")
    )
    expected = [
        Answer(200, b'{"messages":[],"cursor":"a:1:0"}', True, None),
        Answer(503, b"busy", True, 2.0),
        Answer(200, b"{}", False, None),
    ]
    assert Responses().feed(stream) == expected
    for cut in range(1, len(stream)):
        responses = Responses()
        assert responses.feed(stream[:cut]) + responses.feed(stream[cut:]) == expected


def test_anything_else_ends_the_connection() -> None:
    with pytest.raises(ConnectionClosed):
        Responses().feed(b"SSH-2.0-OpenSSH\r\n\r\n")


def test_headers_named_in_keep_are_kept_per_answer() -> None:
    stream = answer("200 OK", b"a", "Last-Modified: Wed, 25 Nov 2026", "ETag: 7") + answer(
        "200 OK", b"b", "Content-Type: text/plain"
    )
    first, second = Responses(keep=(b"Last-Modified", b"etag")).feed(stream)
    assert first.headers == {b"last-modified": b"Wed, 25 Nov 2026", b"etag": b"7"}
    assert second.headers == {}
    assert Responses().feed(stream)[0].headers == {}


def test_answers_read_without_headers_are_framed_alike() -> None:
    stream = answer("503 Service Unavailable", b"busy", "Retry-After: 2", "ETag: 7") + answer(
        "200 OK", b"{}", "Connection: close"
    )
    expected = [Answer(503, b"busy", True, None), Answer(200, b"{}", False, None)]
    for cut in range(1, len(stream)):
        responses = Responses(retry_after=False)
        assert responses.feed(stream[:cut]) + responses.feed(stream[cut:]) == expected
    kept = Responses([b"etag"], retry_after=False).feed(stream)
    assert kept[0].headers == {b"etag": b"7"} and kept[0].retry_after is None
