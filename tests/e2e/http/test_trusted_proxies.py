"""`--trusted-proxies`: X-Forwarded-For names the client only when a trusted proxy sent it."""

from __future__ import annotations

import asyncio
import ipaddress

import aiohttp
import pytest

from pushserver.web.proxies import client_address

PROXY = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128"))


@pytest.mark.parametrize(
    ("peer", "headers", "client"),
    [
        ("203.0.113.5", ["198.51.100.1"], "203.0.113.5"),  # untrusted peer: header ignored
        ("10.0.0.1", ["198.51.100.1"], "198.51.100.1"),
        ("10.0.0.1", ["127.0.0.1, 198.51.100.1"], "198.51.100.1"),  # forged entry on the left
        ("10.0.0.1", ["198.51.100.1, 10.0.0.2"], "198.51.100.1"),  # two trusted proxies
        ("10.0.0.1", ["198.51.100.1", "10.0.0.2"], "198.51.100.1"),  # header given twice
        ("10.0.0.1", ["10.0.0.3, 10.0.0.2"], "10.0.0.3"),  # every hop trusted: the first
        ("10.0.0.1", [], "10.0.0.1"),  # the proxy's own request
        ("::1", ["2001:db8::7"], "2001:db8::7"),
    ],
)
def test_client_is_rightmost_untrusted_hop(peer, headers, client):
    assert client_address(peer, headers, PROXY) == client


async def _publish(url: str, forwarded_for: str) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/pub/p", data=b"x", headers={"X-Forwarded-For": forwarded_for}) as r,
    ):
        return r.status


async def test_forwarded_for_counts_only_from_a_trusted_proxy(server_factory):
    """Loopback may publish without a key; behind a trusted proxy on loopback, the client is
    who counts: a remote one is refused, a forged `127.0.0.1` on the left does not help."""
    plain = server_factory()
    assert await _publish(plain.url, "198.51.100.1") == 201  # header ignored: loopback peer
    proxied = server_factory("--trusted-proxies", "127.0.0.1,::1")
    assert await _publish(proxied.url, "198.51.100.1") == 403
    assert await _publish(proxied.url, "127.0.0.1, 198.51.100.1") == 403
    assert await _publish(proxied.url, "127.0.0.1") == 201


async def test_per_ip_limit_applies_to_forwarded_clients(server_factory):
    srv = server_factory("--trusted-proxies", "127.0.0.1", "--max-connections-per-ip", "1")
    url = f"{srv.url}/stream/a"
    async with aiohttp.ClientSession() as http:
        first = {"X-Forwarded-For": "198.51.100.1"}
        second = {"X-Forwarded-For": "198.51.100.2"}
        async with http.get(url, headers=first) as held, http.get(url, headers=second) as other:
            assert (held.status, other.status) == (200, 200)
            for kind in ("stream", "sse", "ws", "lp"):
                async with http.get(f"{srv.url}/{kind}/b", headers=first) as refused:
                    assert refused.status == 429, kind


async def test_a_trusted_proxys_idle_connections_do_not_use_up_its_clients_limit(server_factory):
    """A proxy keeps connections open ahead of need: with three of them idle, a request it
    forwards for a client is still counted under that client's address alone."""
    srv = server_factory("--trusted-proxies", "127.0.0.1", "--max-connections-per-ip", "3")
    idle = [await asyncio.open_connection("127.0.0.1", srv.port) for _ in range(3)]
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                f"{srv.url}/lp/a?timeout=0", headers={"X-Forwarded-For": "198.51.100.9"}
            ) as resp,
        ):
            assert resp.status == 200
    finally:
        for _, writer in idle:
            writer.close()
