"""Three pushserver nodes on one Redis behind Debian's nginx, with the site block of
docs/operations.md and its "several nodes" upstream (no sticky sessions), addresses replaced.

A long-poll client's re-polls are spread by nginx over every node and it receives every message
once, in order; SSE and WebSocket clients whose node is SIGKILLed reconnect through nginx to
another node with their cursor and miss and repeat nothing.
"""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pushclient import Message, PushClient

from pushserver.launcher import ServerProcess
from pushserver_measure.ports import free_port

from ...nginx import Nginx
from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401
from ..redis.test_redis_broker import wait_until
from .test_nginx import DOC, documented_site, proxy_conf

NODES = 3
WAIT = 30.0
Behind = tuple[list[ServerProcess], str, Path]
"""The nodes, nginx's URL, and nginx's log of which node served each request."""


def several_nodes_site(ports: list[int], listen: str, log: Path) -> str:
    """The documented site with its upstream replaced by the documented "several nodes" one,
    and each request's node logged to `log`."""
    [upstream] = re.findall(r'```nginx title="several nodes"\n(.*?)```', DOC.read_text(), re.S)
    doc_servers = re.findall(r"server [0-9.]+:8080;", upstream)
    assert len(doc_servers) == NODES
    for line, port in zip(doc_servers, ports, strict=True):
        upstream = upstream.replace(line, f"server 127.0.0.1:{port};")
    site = documented_site(ports[0], [listen])
    site = re.sub(r"upstream pushserver \{.*?\n\}\n", upstream, site, count=1, flags=re.S)
    site = site.replace("\nserver {", f"\nserver {{\n    access_log {log} nodes;", 1)
    return "log_format nodes '$upstream_addr $request_method $uri';\n" + site


@pytest.fixture
def nodes_behind_nginx(redis_server: RedisServer, tmp_path: Path) -> Iterator[Behind]:
    nodes: list[ServerProcess] = []
    nginx: Nginx | None = None
    try:
        for _ in range(NODES):
            args = ["--redis", redis_server.url, "--trusted-proxies", "127.0.0.1"]
            nodes.append(ServerProcess(args).start(0))
        port = free_port()
        root = tmp_path / "nginx"
        log = tmp_path / "nodes.log"
        site = several_nodes_site([node.port for node in nodes], f"127.0.0.1:{port}", log)
        nginx = Nginx(root, proxy_conf(root, site), port)
        yield nodes, f"http://127.0.0.1:{port}", log
    finally:  # nodes too when nginx never started
        if nginx is not None:
            nginx.stop()
        for node in nodes:
            node.stop()


async def test_long_poll_repolls_spread_over_nodes_miss_and_repeat_nothing(
    nodes_behind_nginx: Behind,
) -> None:
    nodes, url, log = nodes_behind_nginx
    got: list[Any] = []
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{url}/lp/spread?timeout=0") as r:
            cursor = (await r.json())["cursor"]
        for n in range(30):
            for k in range(n % 3):  # 0, 1 or 2 messages between two polls, from a backend
                async with http.post(f"{nodes[k].url}/pub/spread", json=[n, k]) as r:
                    assert r.status == 201
            params = {"timeout": "0" if n % 3 == 0 else "10", "cursor": cursor}
            async with http.get(f"{url}/lp/spread", params=params) as r:
                body = await r.json()
                assert r.status == 200, body
            got += [m["data"] for m in body["messages"]]
            cursor = body["cursor"]
        async with http.get(f"{url}/lp/spread", params={"timeout": "0", "cursor": cursor}) as r:
            got += [m["data"] for m in (await r.json())["messages"]]
        assert got == [[n, k] for n in range(30) for k in range(n % 3)]
    polls = [line.split()[0] for line in log.read_text().splitlines() if "GET /lp/" in line]
    assert {f"127.0.0.1:{node.port}" for node in nodes} == set(polls)  # every node answered


@pytest.mark.parametrize("transport", ["sse", "ws"])
async def test_a_stream_resumes_on_another_node_after_its_node_is_killed(
    nodes_behind_nginx: Behind, transport: str
) -> None:
    nodes, url, _ = nodes_behind_nginx
    channel = f"moving-{transport}"
    async with (
        PushClient(url) as client,
        aiohttp.ClientSession() as http,
        client.subscribe(channel, transport=transport) as subscription,
    ):
        received: list[Any] = []

        async def read(n: int) -> None:
            while len(received) < n:
                message = await asyncio.wait_for(anext(subscription), WAIT)
                assert isinstance(message, Message), message  # a gap would be a loss
                received.append(message.data)

        async def holders() -> list[ServerProcess]:
            held = []
            for node in nodes:
                async with http.get(f"{node.url}/channels/{channel}") as r:
                    held += [node] if (await r.json()).get("subscribers") else []
            return held

        reading = asyncio.create_task(read(5))  # the connection opens on iteration
        [holder] = await wait_until(holders, "the subscription held on a node")
        for n in range(5):
            await client.publish(channel, n)
        await reading
        holder.stop(signal.SIGKILL)
        for n in range(5, 15):
            await client.publish(channel, n)
        await read(15)
    assert received == list(range(15))
