"""The server behind Debian's nginx, configured with exactly the site block of docs/operations.md.

nginx runs as a child of the test (no daemon, its own prefix and temp directories) on an
ephemeral loopback port; only the upstream address and the listen line of the documented block
are replaced. The Python client talks to nginx on every transport. The check that a
non-loopback client behind the proxy still needs the key runs that client in a network
namespace the test creates and removes (a veth pair on a documentation address range that
nothing on this machine uses), so every packet stays inside this machine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import aiohttp
import pytest
from pushclient import PushClient
from yarl import URL

from pushserver.launcher import ServerProcess
from pushserver_measure.ports import free_port

from ...nginx import Nginx

DOC = Path(__file__).parents[3] / "docs" / "operations.md"
DOC_UPSTREAM = "server 127.0.0.1:8080;"
DOC_LISTEN = "listen 80;"
WAIT = 10.0
"""Deadline for one message to come through; a proxy that buffers would hold it past this."""
MESSAGES = 20


def documented_site(upstream_port: int, listen: list[str]) -> str:
    """The one nginx block of docs/operations.md with its upstream and listen line replaced."""
    blocks = re.findall(r"```nginx\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1, "docs/operations.md must hold exactly one nginx block"
    site = blocks[0]
    assert site.count(DOC_UPSTREAM) == 1 and site.count(DOC_LISTEN) == 1
    site = site.replace(DOC_UPSTREAM, f"server 127.0.0.1:{upstream_port};")
    return site.replace(DOC_LISTEN, " ".join(f"listen {address};" for address in listen))


def proxy_conf(root: Path, site: str) -> str:
    """An nginx.conf that keeps everything under `root` and serves `site`."""
    for temp in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (root / temp).mkdir(parents=True, exist_ok=True)
    (root / "site.conf").write_text(site)
    user = "user root;" if os.geteuid() == 0 else ""  # workers must reach the temp dirs
    return f"""daemon off;
worker_processes 1;
{user}
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    include {root}/site.conf;
}}
"""


@pytest.fixture
def behind_nginx(tmp_path: Path) -> Iterator:
    """`behind_nginx(extra_listen)` starts a server (no publish key, trusting nginx on
    loopback) and nginx in front of it; returns (server, nginx)."""
    started: list = []

    def start(*extra_listen: str) -> tuple[ServerProcess, Nginx]:
        server = ServerProcess(["--trusted-proxies", "127.0.0.1"]).start(0)
        started.append(server)
        port = free_port()
        listen = [f"127.0.0.1:{port}", *(f"{address}:{port}" for address in extra_listen)]
        root = tmp_path / "nginx"
        nginx = Nginx(root, proxy_conf(root, documented_site(server.port, listen)), port)
        started.append(nginx)
        return server, nginx

    yield start
    for process in reversed(started):
        process.stop()


async def one_at_a_time(client: PushClient, transport: str) -> list[float]:
    """Publish MESSAGES messages, each only after the one before it came through; returns the
    publish -> receipt time of each, in seconds."""
    channel = f"nginx-{transport}"
    await client.publish(channel, "first")
    latencies = []
    async with client.subscribe(channel, transport=transport, history=1) as subscription:
        first = await asyncio.wait_for(anext(subscription), WAIT)
        assert first.data == "first"  # subscribed: what follows is live delivery
        for n in range(MESSAGES):
            start = time.perf_counter()
            await client.publish(channel, n)
            message = await asyncio.wait_for(anext(subscription), WAIT)
            latencies.append(time.perf_counter() - start)
            assert (message.channel, message.data) == (channel, n)
    return latencies


async def quiet_long_poll(url: str) -> tuple[int, dict]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=90)) as http,
        http.get(f"{url}/lp/nginx-quiet?timeout=30") as answer,
    ):
        return answer.status, await answer.json()


async def test_every_transport_through_nginx_unbuffered_and_long_polls_uncut(behind_nginx):
    _, nginx = behind_nginx()
    url = f"http://127.0.0.1:{nginx.port}"
    transports = ("longpoll", "stream", "sse", "ws")
    async with PushClient(url) as client:
        poll, *latencies = await asyncio.gather(
            quiet_long_poll(url), *(one_at_a_time(client, t) for t in transports)
        )
    status, body = poll
    assert status == 200, body
    assert body["messages"] == [] and body["cursor"].startswith("nginx-quiet:")
    for transport, seconds in zip(transports, latencies, strict=True):
        ms = sorted(1000 * s for s in seconds)
        print(
            f"through nginx, {transport}: publish->receipt median {statistics.median(ms):.1f} ms,"
            f" worst {ms[-1]:.1f} ms over {len(ms)} messages"
        )


async def test_the_longest_subscription_resumes_through_nginx(behind_nginx):
    """64 channels of 128 characters, all `:` and `@`, come back through nginx with their
    cursor: in the URL, percent-encoded as browsers send it, and in SSE's Last-Event-ID."""
    _, nginx = behind_nginx()
    url = f"http://127.0.0.1:{nginx.port}"
    names = [f"{n:07b}".translate({48: ":", 49: "@"}).ljust(128, ":") for n in range(64)]
    channels = ",".join(names)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{url}/lp/{channels}", params={"timeout": "0"}) as r:
            cursor = (await r.json())["cursor"]
        async with http.post(f"{url}/pub/{names[-1]}", data=b"resumed") as r:
            assert r.status == 201
        target = f"{url}/lp/{channels}?timeout=0&cursor={quote(cursor, safe='')}"
        async with http.get(URL(target, encoded=True)) as r:
            assert r.status == 200, await r.text()
            [message] = (await r.json())["messages"]
        assert message["data"] == "resumed"
        headers = {"Last-Event-ID": cursor}
        async with http.get(f"{url}/sse/{channels}", headers=headers) as r:
            assert r.status == 200
            while not (line := await r.content.readline()).startswith(b"data: "):
                pass
        assert json.loads(line[6:])["data"] == "resumed"


def ip(*args: str) -> str:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


TEST_NETS = tuple(
    ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
)
"""Documentation ranges (RFC 5737); the first that no address or route of this machine is in
carries the namespace's link. A machine may itself sit on one of them (192.0.2.1 is the
gateway of some sandboxes), and a second copy of it here would hijack its traffic."""


def unused_test_net() -> ipaddress.IPv4Network | None:
    used = [
        ipaddress.ip_network(f"{a['local']}/{a['prefixlen']}", strict=False)
        for link in json.loads(ip("-j", "-4", "addr"))
        for a in link.get("addr_info", ())
    ]
    used += [
        ipaddress.ip_network(route["dst"], strict=False)
        for route in json.loads(ip("-j", "-4", "route", "show", "table", "all"))
        if route.get("dst", "default") != "default"
    ]
    return next((net for net in TEST_NETS if not any(net.overlaps(u) for u in used)), None)


@dataclasses.dataclass
class Namespace:
    name: str | None
    """None when this machine does not allow a namespace; `why_not` says why."""
    proxy: str = ""
    client: str = ""
    why_not: str = ""


@pytest.fixture
def client_namespace() -> Iterator[Namespace]:
    """A network namespace whose only link is a veth pair to this machine, on a documentation
    range nothing else here uses: the client inside can reach nginx and nothing else."""
    name = f"pushtest{os.getpid()}"
    outside, inside = f"pt{os.getpid()}a"[:15], f"pt{os.getpid()}b"[:15]
    net = unused_test_net()
    if net is None:
        yield Namespace(None, why_not="every RFC 5737 range is in use on this machine")
        return
    proxy, client = (str(host) for host in itertools.islice(net.hosts(), 2))
    try:
        ip("netns", "add", name)
    except (OSError, subprocess.CalledProcessError) as exc:
        yield Namespace(None, why_not=(getattr(exc, "stderr", None) or str(exc)).strip())
        return
    try:
        ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        ip("link", "set", inside, "netns", name)
        ip("addr", "add", f"{proxy}/{net.prefixlen}", "dev", outside)
        ip("link", "set", outside, "up")
        ip("-n", name, "addr", "add", f"{client}/{net.prefixlen}", "dev", inside)
        ip("-n", name, "link", "set", inside, "up")
        yield Namespace(name, proxy, client)
    finally:
        subprocess.run(["ip", "link", "del", outside], capture_output=True)
        ip("netns", "del", name)


FORGED_PUBLISH = """
import sys, urllib.error, urllib.request
request = urllib.request.Request(sys.argv[1], data=b"x", headers={"X-Forwarded-For": "127.0.0.1"})
try:
    print(urllib.request.urlopen(request, timeout=10).status)
except urllib.error.HTTPError as exc:
    print(exc.code)
"""


def in_namespace(namespace: str, *args: str) -> subprocess.CompletedProcess:
    command = ["ip", "netns", "exec", namespace, sys.executable, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


async def test_publishing_through_nginx_is_attributed_to_the_client(behind_nginx, client_namespace):
    namespace = client_namespace
    server, nginx = behind_nginx(*([namespace.proxy] if namespace.name else []))
    async with PushClient(f"http://127.0.0.1:{nginx.port}") as client:
        receipt = await client.publish("nginx-pub", "from loopback")  # loopback, no key: allowed
    assert receipt.id == 1
    if namespace.name is None:
        pytest.skip(f"no network namespace for a non-loopback client: {namespace.why_not}")
    url = f"http://{namespace.proxy}:{nginx.port}"
    published = in_namespace(namespace.name, "-m", "pushclient", "pub", url, "nginx-pub", "x")
    assert published.returncode == 1 and "403" in published.stderr, published.stderr
    forged = in_namespace(namespace.name, "-c", FORGED_PUBLISH, f"{url}/pub/nginx-pub")
    assert forged.stdout.strip() == "403", forged.stderr
    async with PushClient(server.url) as client:
        assert (await client.channel("nginx-pub"))["last_id"] == 1
