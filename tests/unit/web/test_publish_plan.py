"""A publish head's plan: which publishes the front end serves itself, and what it reads from
the head once for every repeat of it."""

from __future__ import annotations

import pytest

from pushserver.config import Settings
from pushserver.web.front.head import HeadParser
from pushserver.web.front.publish import Plan, plan

SETTINGS = Settings(max_message_bytes=1000)


def head_of(request: str) -> bytes:
    line, _, fields = request.partition("\n")
    return f"{line}\nHost: x\n{fields}\n".replace("\n", "\r\n").encode("latin-1")


def planned(request: str) -> Plan | None:
    return plan(HeadParser(8190, 8190, 64).parse(head_of(request)), SETTINGS)


@pytest.mark.parametrize(
    ("request_", "batch", "limit", "as_json"),
    [
        (
            "POST /pub/a HTTP/1.1\nContent-Type: application/json\nContent-Length: 2\n",
            False,
            1000,
            True,
        ),
        (
            "POST /pub HTTP/1.1\nContent-Type: application/json\nContent-Length: 2\n",
            True,
            16000,
            True,
        ),
        (
            "POST /pub/a HTTP/1.1\nContent-Type: Application/JSON; charset=utf-8\n",
            False,
            1000,
            True,
        ),
        ("POST /pub/a HTTP/1.1\nContent-Type: application/ld+json\n", False, 1000, True),
        ("POST /pub/a HTTP/1.1\nContent-Type: text/plain\n", False, 1000, False),
        ("POST /pub/a HTTP/1.1\n", False, 1000, False),
        ("POST /pub/a HTTP/1.1\nTransfer-Encoding: chunked\n", False, 1000, False),
        (
            "POST /pub/a HTTP/1.1\nExpect: 100-Continue\nContent-Encoding: identity\n",
            False,
            1000,
            False,
        ),
    ],
)
def test_a_publish_is_planned_from_its_head(request_, batch, limit, as_json) -> None:
    got = planned(request_)
    assert got is not None
    assert (got.batch, got.limit, got.as_json, got.authorization) == (batch, limit, as_json, None)
    assert got.head.path in ("/pub", "/pub/a")


def test_the_authorization_is_kept_as_aiohttp_gives_it() -> None:
    got = planned("POST /pub/a HTTP/1.1\nAuthorization: Bearer k\xc3\xa9y\n")
    assert got is not None and got.authorization == "Bearer k\u00e9y"
    bad = planned("POST /pub/a HTTP/1.1\nAuthorization: Bearer \xff\n")
    assert bad is not None and bad.authorization == "Bearer \udcff"


@pytest.mark.parametrize(
    "request_",
    [
        "GET /pub/a HTTP/1.1\n",
        "PUT /pub/a HTTP/1.1\n",
        "POST /public HTTP/1.1\n",
        "POST /pub/a HTTP/1.1\nContent-Encoding: gzip\n",
    ],
)
def test_anything_else_is_left_to_aiohttp(request_) -> None:
    assert planned(request_) is None


@pytest.mark.parametrize("path", ["/pub/", "/pub/a/b"])
def test_a_path_under_pub_is_planned_whatever_follows(path) -> None:
    """The channel is checked when the publish is served (`400 bad_channel`), as for `/lp/`."""
    got = planned(f"POST {path} HTTP/1.1\n")
    assert got is not None and not got.batch
