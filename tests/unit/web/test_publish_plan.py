"""A publish head's plan: what the front end reads from the head once for every repeat of it,
and the content codings it reads bodies in."""

from __future__ import annotations

import pytest

from pushserver.config import Settings
from pushserver.web.errors import UnsupportedEncoding, refusal_headers, status_of
from pushserver.web.front.publish import Plan, plan
from pushserver.web.http.parser import HeadParser

SETTINGS = Settings(max_message_bytes=1000)


def head_of(request: str) -> bytes:
    line, _, fields = request.partition("\n")
    return f"{line}\nHost: x\n{fields}\n".replace("\n", "\r\n").encode("latin-1")


def planned(request: str) -> Plan:
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
    assert (got.batch, got.limit, got.as_json, got.authorization) == (batch, limit, as_json, None)
    assert got.coding is None
    assert got.head.path in ("/pub", "/pub/a")


def test_the_authorization_is_kept_as_aiohttp_gives_it() -> None:
    got = planned("POST /pub/a HTTP/1.1\nAuthorization: Bearer k\xc3\xa9y\n")
    assert got is not None and got.authorization == "Bearer k\u00e9y"
    bad = planned("POST /pub/a HTTP/1.1\nAuthorization: Bearer \xff\n")
    assert bad is not None and bad.authorization == "Bearer \udcff"


@pytest.mark.parametrize(
    ("encoding", "coding"),
    [("gzip", "gzip"), ("GZip", "gzip"), ("x-gzip", "x-gzip"), ("deflate", "deflate")],
)
def test_a_compressed_body_is_planned_with_its_coding(encoding, coding) -> None:
    got = planned(f"POST /pub/a HTTP/1.1\nContent-Encoding: {encoding}\n")
    assert got is not None and got.coding == coding


@pytest.mark.parametrize("encoding", ["br", "compress", "zstd", "gzip, gzip"])
def test_a_coding_not_read_is_refused_with_the_ones_that_are(encoding) -> None:
    with pytest.raises(UnsupportedEncoding) as refused:
        planned(f"POST /pub/a HTTP/1.1\nContent-Encoding: {encoding}\n")
    assert status_of(refused.value) == 415
    assert refusal_headers(refused.value) == {"Accept-Encoding": "gzip, deflate"}


@pytest.mark.parametrize(
    ("request_", "expect"),
    [
        ("POST /pub/a HTTP/1.1\nExpect: 100-continue\n", True),
        ("POST /pub/a HTTP/1.0\nExpect: 100-continue\n", False),
        ("POST /pub/a HTTP/1.1\n", False),
    ],
)
def test_an_expectation_is_met_on_http11_only(request_, expect) -> None:
    assert planned(request_).expect == expect


@pytest.mark.parametrize("path", ["/pub/", "/pub/a/b"])
def test_a_path_under_pub_is_planned_whatever_follows(path) -> None:
    """The channel is checked when the publish is served (`400 bad_channel`), as for `/lp/`."""
    got = planned(f"POST {path} HTTP/1.1\n")
    assert got is not None and not got.batch
