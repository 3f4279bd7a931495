"""Fuzz the HTTP API from its own OpenAPI description (docs/openapi.yaml, served at
/openapi.yaml): no 500s, and every answer matches the description.

Bounded runs; docs/security.md gives the command for a longer one.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import yaml
from aiohttp import web

from pushserver.launcher import ServerProcess
from pushserver.web.app import add_routes
from pushserver.web.front.routes import ROUTES as PUBLISH_ROUTES
from pushserver.web.transports import ROUTES

SPEC = Path(__file__).resolve().parents[3] / "docs" / "openapi.yaml"
CHECKS = ",".join(
    (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    )
)
HELD = r"^/(stream|sse)/"


def schemathesis(url: str, tmp_path: Path, *filters: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            f"{url}/openapi.yaml",
            "--url",
            url,
            "--checks",
            CHECKS,
            "--max-examples",
            "15",
            "--request-timeout",
            "15",
            "--workers",
            "1",
            *filters,
        ],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=tmp_path,
    )


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read()


def test_served_description_covers_every_route(server):
    served = _get(f"{server.url}/openapi.yaml")
    assert served == SPEC.read_bytes()
    app = web.Application()
    add_routes(app)
    routes = {resource.canonical for resource in app.router.resources()}
    routes |= {*ROUTES, *PUBLISH_ROUTES}
    assert set(yaml.safe_load(served)["paths"]) == routes


def test_description_has_every_documented_error_code():
    protocol = (SPEC.parent / "protocol.md").read_text()
    table = protocol.split("## Errors", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([a-z_]+)`", table)) - {"error", "message"}
    enum = yaml.safe_load(SPEC.read_text())["components"]["schemas"]["Error"]["properties"]
    assert documented and documented <= set(enum["error"]["enum"])


def test_fuzz_everything_but_held_streams(tmp_path):
    """Long-polls bounded to 1 s, so every generated request gets its answer."""
    with ServerProcess(["--max-timeout", "1", "--default-timeout", "0.1"]) as srv:
        run = schemathesis(srv.url, tmp_path, "--exclude-path-regex", HELD)
        stats = orjson.loads(_get(f"{srv.url}/stats"))
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert stats["connections"]["total"] == 0


def test_fuzz_held_stream_requests(tmp_path):
    """Held streams never end by themselves, so a stream held by the test fills the per-address
    limit: every fuzzed request is parsed and checked in full, then answered at once."""
    with (
        ServerProcess(["--max-connections-per-ip", "1"]) as srv,
        socket.create_connection(("127.0.0.1", srv.port)) as held,
    ):
        held.sendall(b"GET /stream/held HTTP/1.1\r\nHost: fuzz\r\n\r\n")
        assert held.recv(100).startswith(b"HTTP/1.1 200")
        run = schemathesis(srv.url, tmp_path, "--include-path-regex", HELD)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
