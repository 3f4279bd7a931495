"""Limits answer with the documented JSON error and show up in /stats limits_hit; CORS."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import aiohttp
import orjson
import pytest

from pushserver.core.ratelimit import RateLimiter
from pushserver.launcher import ServerProcess

APP = "https://app.example"
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


async def _stats(url: str) -> dict:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/stats") as resp:
        return await resp.json()


async def _request(method: str, url: str, **kwargs) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as http, http.request(method, url, **kwargs) as resp:
        return resp.status, dict(resp.headers), await resp.read()


def _error(body: bytes) -> str:
    payload = orjson.loads(body)
    assert set(payload) == {"error", "message"}
    return payload["error"]


async def test_publish_rate_limit(server_factory):
    srv = server_factory("--max-publish-rate", "2")
    statuses = []
    for _ in range(6):
        status, headers, body = await _request("POST", f"{srv.url}/pub/news", data=b"x")
        statuses.append(status)
        if status == 429:
            assert _error(body) == "rate_limited"
            assert int(headers["Retry-After"]) >= 1
    assert statuses[:2] == [201, 201] and 429 in statuses
    assert (await _stats(srv.url))["limits_hit"]["max_publish_rate"] == statuses.count(429)
    deadline = time.monotonic() + 10
    while (await _request("POST", f"{srv.url}/pub/news", data=b"x"))[0] != 201:
        assert time.monotonic() < deadline, "bucket never refilled"
        await asyncio.sleep(0.1)


async def test_size_and_count_limits_are_counted(server_factory):
    srv = server_factory(
        "--max-message-bytes",
        "100",
        "--max-channels-per-subscription",
        "2",
        "--max-timeout",
        "5",
        "--default-timeout",
        "1",
    )
    status, _, body = await _request("POST", f"{srv.url}/pub/news", data=b"x" * 101)
    assert (status, _error(body)) == (413, "too_large")
    status, _, body = await _request(
        "POST", f"{srv.url}/pub", json=[{"channel": "a", "data": "x" * 200}]
    )
    assert (status, _error(body)) == (413, "too_large")
    status, _, body = await _request("GET", f"{srv.url}/lp/a,b,c?timeout=0")
    assert (status, _error(body)) == (400, "too_many_channels")
    status, _, body = await _request("GET", f"{srv.url}/lp/a?timeout=6")
    assert (status, _error(body)) == (400, "bad_timeout")
    hit = (await _stats(srv.url))["limits_hit"]
    assert hit == {"max_message_bytes": 2, "max_channels_per_subscription": 1, "max_timeout": 1}


async def test_per_ip_connection_limit(server_factory):
    srv = server_factory("--max-connections-per-ip", "1")
    async with aiohttp.ClientSession() as http, http.get(f"{srv.url}/stream/a") as held:
        assert held.status == 200
        for kind in ("stream", "sse", "ws", "lp"):
            status, _, body = await _request("GET", f"{srv.url}/{kind}/b")
            assert (status, _error(body)) == (429, "too_many_connections")
    assert (await _stats(srv.url))["limits_hit"]["max_connections_per_ip"] == 4


async def test_over_capacity_has_retry_after(server_factory):
    srv = server_factory("--max-connections", "1")
    async with aiohttp.ClientSession() as http, http.get(f"{srv.url}/sse/a") as held:
        assert held.status == 200
        status, headers, body = await _request("GET", f"{srv.url}/ws/b")
    assert (status, _error(body)) == (503, "over_capacity")
    assert int(headers["Retry-After"]) >= 1
    assert (await _stats(srv.url))["limits_hit"]["max_connections"] == 1


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /lp/" + b"a" * 42_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", b"414"),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 17_000 + b"\r\n\r\n", b"431"),
    ],
    ids=["long-url", "long-header"],
)
def test_oversized_request_head_is_refused(server, request_bytes, status):
    """The front end refuses these before routing them, with a JSON `too_large`, and closes."""
    answer = _raw(server.port, request_bytes)
    assert answer.split(b" ", 2)[1] == status
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"] == "too_large"
    assert _raw(server.port, HEALTHZ).endswith(b"ok")
    assert "Traceback" not in server.log, "a client's malformed request is not a server error"


@pytest.fixture(scope="module")
def cors_server():
    with ServerProcess(["--cors-origin", f"{APP},*", "--heartbeat", "1"]) as srv:
        yield srv


async def test_cors_listed_origin_gets_credentials(cors_server):
    status, headers, _ = await _request(
        "GET", f"{cors_server.url}/healthz", headers={"Origin": APP}
    )
    assert status == 200
    assert headers["Access-Control-Allow-Origin"] == APP
    assert headers["Access-Control-Allow-Credentials"] == "true"
    assert "Retry-After" in headers["Access-Control-Expose-Headers"]
    assert "Origin" in headers["Vary"]


async def test_cors_wildcard_never_allows_credentials(cors_server):
    status, headers, _ = await _request(
        "GET", f"{cors_server.url}/lp/a?timeout=0", headers={"Origin": "https://other.example"}
    )
    assert status == 200
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Credentials" not in headers
    assert "Origin" in headers["Vary"]


async def test_cors_on_errors_streams_and_websocket(cors_server):
    status, headers, _ = await _request(
        "GET", f"{cors_server.url}/lp/bad!name", headers={"Origin": APP}
    )
    assert status == 400 and headers["Access-Control-Allow-Origin"] == APP
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{cors_server.url}/stream/a", headers={"Origin": APP}) as resp:
            assert resp.headers["Access-Control-Allow-Origin"] == APP
        async with http.get(f"{cors_server.url}/sse/a", headers={"Origin": APP}) as resp:
            assert resp.headers["Access-Control-Allow-Origin"] == APP
        async with http.ws_connect(f"{cors_server.url}/ws/a", headers={"Origin": APP}) as ws:
            assert ws._response.headers["Access-Control-Allow-Origin"] == APP


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/pub/a", "POST"),
        ("/pub", "POST"),
        ("/lp/a", "GET"),
        ("/sse/a,b", "GET"),
        ("/stats", "GET"),
    ],
)
async def test_cors_preflight_on_every_route(cors_server, path, method):
    status, headers, body = await _request(
        "OPTIONS",
        f"{cors_server.url}{path}",
        headers={
            "Origin": APP,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert status == 204 and body == b""
    assert method in headers["Access-Control-Allow-Methods"]
    assert "Authorization" in headers["Access-Control-Allow-Headers"]
    assert "Idempotency-Key" in headers["Access-Control-Allow-Headers"]  # publish retries
    assert headers["Access-Control-Allow-Origin"] == APP


async def test_no_cors_setting_means_no_cors_headers(server):
    status, headers, _ = await _request("GET", f"{server.url}/healthz", headers={"Origin": APP})
    assert status == 200
    assert not [h for h in headers if h.lower().startswith("access-control-")]
    status, headers, body = await _request(
        "OPTIONS",
        f"{server.url}/pub/a",
        headers={"Origin": APP, "Access-Control-Request-Method": "POST"},
    )
    assert (status, _error(body)) == (405, "method_not_allowed")
    assert not [h for h in headers if h.lower().startswith("access-control-")]


async def test_cors_listed_only_ignores_other_origins(server_factory):
    srv = server_factory("--cors-origin", APP)
    status, headers, _ = await _request(
        "GET", f"{srv.url}/healthz", headers={"Origin": "https://evil.example"}
    )
    assert status == 200 and "Access-Control-Allow-Origin" not in headers


def test_rate_limiter_memory_is_bounded():
    """Buckets that refilled are dropped, and never more than the cap are kept."""
    limiter = RateLimiter(rate=10, max_buckets=1000)
    for n in range(5000):
        assert limiter.take(f"10.0.{n // 256}.{n % 256}", now=0.0) == 0.0
    assert len(limiter) == 1000
    assert limiter.take("late", now=5.0) == 0.0
    assert len(limiter) == 1
    for _ in range(10):
        limiter.take("busy", now=6.0)
    assert limiter.take("busy", now=6.0) == pytest.approx(0.1)


async def test_publish_key_is_required_and_checked(server_factory):
    srv = server_factory("--publish-key", "k" * 40)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic " + "k" * 40}):
        status, got, body = await _request("POST", f"{srv.url}/pub/a", data=b"x", headers=headers)
        assert (status, _error(body)) == (401, "unauthorized")
        assert got["WWW-Authenticate"].startswith("Bearer")
    auth = {"Authorization": "Bearer " + "k" * 40}
    status, _, _ = await _request("POST", f"{srv.url}/pub/a", data=b"x", headers=auth)
    assert status == 201
