"""Where each request head goes (`web/front/routes.py`): subscribe paths to their transport's
handlers, publish paths to the publish handler, `OPTIONS *`, and everything else to aiohttp."""

from __future__ import annotations

import pytest

from pushserver.web.front import forward, publish, routes
from pushserver.web.http.parser import HeadParser
from pushserver.web.http.request import RequestHead
from pushserver.web.transports import REGISTRY, longpoll, ws

ROUTES = routes.Routes(REGISTRY)


def head(line: str, *fields: str) -> RequestHead:
    raw = "\r\n".join([line, "Host: x", *fields, "", ""]).encode()
    return HeadParser(8190, 8190, 64).parse(raw)


def test_a_subscribe_get_goes_to_its_transport_and_has_no_body() -> None:
    assert ROUTES.route(head("GET /lp/a HTTP/1.1")) == (longpoll.handle, routes.NO_BODY)
    assert ROUTES.route(head("GET /ws/a,b HTTP/1.1")) == (ws.handle, routes.NO_BODY)
    probe, no_body = ROUTES.route(head("HEAD /lp/a HTTP/1.1"))
    assert probe.keywords == {"check": longpoll.check} and no_body == routes.NO_BODY
    assert ROUTES.route(head("POST /sse/a HTTP/1.1")) == (ROUTES.subscribe_other, routes.NO_BODY)


def test_every_transport_of_the_registry_is_routed_by_its_segment() -> None:
    for transport in REGISTRY:
        serve, _ = ROUTES.route(head(f"GET /{transport.segment}/a HTTP/1.1"))
        assert serve == transport.serve


@pytest.mark.parametrize("path", ["/pub", "/pub/a", "/pub/a/b", "/pub/"])
def test_a_post_on_a_publish_path_is_published(path: str) -> None:
    assert ROUTES.route(head(f"POST {path} HTTP/1.1")) == (publish.handle, None)


@pytest.mark.parametrize("method", ["GET", "PUT", "HEAD", "OPTIONS", "DELETE"])
def test_other_methods_on_a_publish_path_are_answered_here(method: str) -> None:
    for path in ("/pub", "/pub/a"):
        assert ROUTES.route(head(f"{method} {path} HTTP/1.1")) == (ROUTES.publish_other, None)


@pytest.mark.parametrize(
    "line",
    [
        "GET /healthz HTTP/1.1",
        "GET /stats HTTP/1.1",
        "POST /public HTTP/1.1",
        "GET /pub/a/b HTTP/1.1",
        "GET /lp HTTP/1.1",
        "GET /unknown/a HTTP/1.1",
        "OPTIONS /stats HTTP/1.1",
    ],
)
def test_everything_else_goes_to_aiohttp(line: str) -> None:
    assert ROUTES.route(head(line)) == (forward.serve, None)


def test_options_asterisk_names_the_server_and_has_no_body() -> None:
    serve, no_body = ROUTES.route(head("OPTIONS * HTTP/1.1"))
    assert serve is routes.options_server and no_body
