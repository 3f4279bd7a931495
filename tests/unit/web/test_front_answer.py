"""Answers the front end writes: a whole answer from a head made once per kind of answer is the
head `answer.head` writes for it, whatever the version, status, headers and body."""

from __future__ import annotations

import time

import pytest

from pushserver.web.http import answer


@pytest.fixture(autouse=True)
def one_date(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same `Date` for both sides of a comparison, even across a second's turn: the clock
    stopped, which `answer` reads through `time` however it is built."""
    monkeypatch.setattr(time, "time", lambda: 1795694400.25)


@pytest.mark.parametrize("version", ["1.0", "1.1"])
@pytest.mark.parametrize("keep_alive", [True, False])
@pytest.mark.parametrize("status", [200, 201])
def test_whole_is_head_and_body(version: str, keep_alive: bool, status: int) -> None:
    # A `%`, NUL or SOH in a value is not a placeholder; a Latin-1 character is sent as its byte.
    headers = (answer.JSON, ("X-Rate", "100%d%s"), ("X-Odd", "a\x00b\x01c"), ("X-Name", "caf\xe9"))
    for body in (b"", b'{"id":1}', b"x" * 70000):
        expected = answer.head(status, headers, version, keep_alive, len(body)) + body
        assert answer.whole(status, headers, version, keep_alive, body) == expected


@pytest.mark.parametrize("version", ["1.0", "1.1"])
@pytest.mark.parametrize("keep_alive", [True, False])
@pytest.mark.parametrize("status", [201, 200, 202])
def test_a_json_answer_is_the_whole_answer_made_and_found_again(
    version: str, keep_alive: bool, status: int
) -> None:
    for body in (b"", b'{"channel":"a","id":1,"subscribers":0}', b"%d%s" * 9000):
        expected = answer.whole(status, (answer.JSON,), version, keep_alive, body)
        assert answer.json_whole(status, version, keep_alive, body) == expected  # made
        assert answer.json_whole(status, version, keep_alive, body) == expected  # found


def test_the_long_poll_answer_is_the_plain_whole_answer() -> None:
    body = b'{"messages":[],"cursor":""}'
    plain = answer.whole(200, (answer.NO_CACHE, answer.JSON), "1.1", True, body)
    assert answer.json_answer(body) == plain


def test_cors_and_compression_share_one_vary_line():
    compressed = [("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")]
    cors = [("Access-Control-Allow-Origin", "*"), ("Vary", "Origin")]
    assert answer.with_cors(compressed, cors) == [
        ("Content-Encoding", "gzip"),
        ("Access-Control-Allow-Origin", "*"),
        ("Vary", "Accept-Encoding, Origin"),
    ]
    assert answer.with_cors(compressed, []) is compressed
    assert answer.with_cors([], cors) == cors
