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
