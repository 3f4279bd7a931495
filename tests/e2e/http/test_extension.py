"""aiohttp as the extension point (`--extension MODULE:FUNCTION`, docs/operations.md): a route
and a middleware an operator adds with aiohttp's own API are served on the public port, beside
the server's own routes, on the same keep-alive connections as subscriptions; their errors are
JSON errors like every other; a route on a path the front end serves is refused at startup."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pushserver.launcher import ServerError, ServerProcess

from ...inprocess import DEADLINE, get, read_response

EXTENSION = """
from aiohttp import web

KEY = web.AppKey("greetings", list)


@web.middleware
async def stamped(request, handler):
    response = await handler(request)
    response.headers["X-Extension"] = "yes"
    return response


async def hello(request):
    request.app[KEY].append(request.match_info["name"])
    return web.json_response({"hello": request.match_info["name"], "seen": request.app[KEY]})


async def broken(request):
    raise web.HTTPForbidden(reason="not for you")


async def crashing(request):
    raise RuntimeError("a bug in the extension")


def extend(app):
    app[KEY] = []
    app.router.add_get("/hello/{name}", hello)
    app.router.add_get("/broken", broken)
    app.router.add_get("/crashing", crashing)
    app.middlewares.append(stamped)


def shadowing(app):
    app.router.add_get("/lp/{channels}", hello)
"""


@pytest.fixture
def module(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "operator_routes.py").write_text(textwrap.dedent(EXTENSION))
    return {"PYTHONPATH": str(tmp_path)}


async def test_routes_and_middleware_added_with_aiohttp_are_served_beside_the_subscriptions(
    module: dict[str, str],
) -> None:
    with ServerProcess(["--extension", "operator_routes:extend"], env=module) as srv:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        for request in (
            get("/hello/ada"),
            get("/lp/ext?timeout=0"),
            get("/hello/bob"),
            get("/broken"),
            get("/crashing"),
            get("/stats"),
        ):
            writer.write(request)
        answers = [await asyncio.wait_for(read_response(reader), DEADLINE) for _ in range(6)]
        (hello, poll, again, broken, crashing, stats) = answers
        assert hello[0].startswith(b"HTTP/1.1 200 ") and b"X-Extension: yes" in hello[0]
        assert json.loads(hello[1]) == {"hello": "ada", "seen": ["ada"]}
        assert poll[0].startswith(b"HTTP/1.1 200 ") and json.loads(poll[1])["messages"] == []
        assert json.loads(again[1])["seen"] == ["ada", "bob"]  # one app, state kept
        assert broken[0].startswith(b"HTTP/1.1 403 ")
        assert json.loads(broken[1]) == {"error": "bad_request", "message": "not for you"}
        assert crashing[0].startswith(b"HTTP/1.1 500 ")
        assert json.loads(crashing[1])["error"] == "internal"
        assert json.loads(stats[1])["connections"]["longpoll"] == 0
        writer.close()
    assert "a bug in the extension" in srv.log


def test_an_extension_that_cannot_be_loaded_or_shadows_the_front_end_stops_the_start(
    module: dict[str, str], tmp_path: Path
) -> None:
    for spec, says in (
        ("operator_routes:shadowing", "route /lp/{channels} would never be reached"),
        ("operator_routes:missing", "operator_routes has no missing"),
        ("no_such_module:extend", "cannot import no_such_module"),
    ):
        with pytest.raises(ServerError) as failed:
            ServerProcess(["--extension", spec], env=module).start(0)
        assert says in str(failed.value)
    done = subprocess.run(
        [sys.executable, "-m", "pushserver", "--extension", "not a function"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2 and "--extension must be MODULE:FUNCTION" in done.stderr
