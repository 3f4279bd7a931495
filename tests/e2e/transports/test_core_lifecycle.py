"""Graceful shutdown, configuration sources, metrics and stats."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import struct
import subprocess
import sys
import time
import urllib.request

import aiohttp
import pytest

import pushserver.core.hub
from pushserver.config import ConfigError, Settings, parse
from pushserver.launcher import ServerProcess
from pushserver.web.transports.ws import CLOSE_TIMEOUT

from ...wire import (
    CLOSE,
    Subscriber,
    masked,
    open_ws,
    publish,
    read_frame,
    take,
    wait_for_stats,
    wait_for_subscribers,
)
from .test_core_transports import head_cursor


async def test_sigterm_answers_longpolls_and_tells_streams_to_reconnect(server_factory):
    srv = server_factory("--shutdown-timeout", "5")
    async with aiohttp.ClientSession() as s:
        cursor = await head_cursor(s, srv.url, "bye")
        await publish(s, srv.url, "bye", "last")
        async with s.get(f"{srv.url}/lp/bye", params={"cursor": cursor}) as r:
            cursor = (await r.json())["cursor"]
        queries = [{"cursor": cursor}, {"cursor": cursor}, {"cursor": cursor, "callback": "cb"}]
        polls = [asyncio.create_task(s.get(f"{srv.url}/lp/bye", params=q)) for q in queries]
        streams = [Subscriber(s, srv.url, t, "bye") for t in ("stream", "sse", "ws")]
        for sub in streams:
            await sub.connect()
        await wait_for_stats(s, srv.url, lambda st: st["connections"]["total"] == 6, "6 held")
        started = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        for poll, query in zip(polls, queries, strict=True):
            async with await poll as r:
                assert r.status == 200
                assert r.headers["Connection"] == "close"  # as the server does right after
                text = await r.text()
            body = text[3:-2] if "callback" in query else text
            assert json.loads(body) == {"messages": [], "cursor": cursor}
        for sub in streams:
            [event] = await take(sub, 1)
            assert event["type"] == "reconnect" and event["cursor"].startswith("bye:")
        code = await asyncio.to_thread(srv.proc.wait, 15)
    assert code == 0
    assert time.monotonic() - started < 5 + 2
    assert "stopped" in srv.log


async def test_shutdown_timeout_bounds_exit(server_factory):
    """A client that never finishes reading cannot hold the server past --shutdown-timeout."""
    srv = server_factory("--shutdown-timeout", "1")
    _reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    writer.write(b"POST /pub/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
    await writer.drain()
    started = time.monotonic()
    srv.proc.send_signal(signal.SIGINT)
    code = await asyncio.to_thread(srv.proc.wait, 15)
    writer.close()
    assert code == 0
    assert time.monotonic() - started < 1 + 3


async def test_healthz_and_stats_and_metrics(server):
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{server.url}/healthz") as r:
            assert r.status == 200
        sub = Subscriber(s, server.url, "sse", "m")
        await sub.connect()
        await wait_for_stats(s, server.url, lambda st: st["connections"]["sse"] == 1, "sse sub")
        await publish(s, server.url, "m", 1)
        stats = await wait_for_stats(
            s, server.url, lambda st: st["delivered"]["sse"] == 1, "delivery"
        )
        for key in (
            "connections",
            "channels",
            "messages_in",
            "messages_out",
            "rss_bytes",
            "history_bytes",
            "history_messages",
            "malloc_trims",
            "uptime",
            "cpu_percent",
            "cpu_seconds",
            "pid",
            "worker",
            "heartbeat",
        ):
            assert key in stats
        assert stats["messages_in"] == 1 and stats["messages_out"] == 1
        assert stats["history_messages"] == 1 and stats["history_bytes"] > 0
        async with s.get(f"{server.url}/metrics") as r:
            text = await r.text()
        await sub.close()
    for name in (
        'pushserver_connections{transport="sse",worker="0"} 1.0',
        'pushserver_messages_published_total{worker="0"} 1.0',
        'pushserver_messages_delivered_total{transport="sse",worker="0"} 1.0',
        "pushserver_publish_to_write_seconds_bucket",
        "pushserver_gc_pause_seconds_bucket",
        'pushserver_history_messages{worker="0"} 1.0',
    ):
        assert name in text, name


def test_settings_precedence(tmp_path, monkeypatch):
    toml = tmp_path / "push.toml"
    toml.write_text("history_size = 7\nheartbeat = 3.5\nport = 9000\n")
    monkeypatch.setenv("PUSHSERVER_HEARTBEAT", "4")
    monkeypatch.setenv("PUSHSERVER_PORT", "9001")
    settings = parse(["--config", str(toml), "--port", "9002"])
    assert (settings.history_size, settings.heartbeat, settings.port) == (7, 4.0, 9002)
    assert parse([]).port == 9001
    monkeypatch.delenv("PUSHSERVER_PORT")
    assert parse([]) == Settings(heartbeat=4.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "2"], "--workers > 1 needs --redis"),
        (["--history-size", "zero"], "--history-size must be an integer"),
        (["--gc-threshold", "1,2"], "--gc-threshold must be three integers"),
        (["--max-flush-delay", "1"], "--max-flush-delay must be 0..0.1 seconds"),
        (["--config", "/nonexistent.toml"], "--config: cannot read /nonexistent.toml"),
    ],
)
def test_bad_settings_are_clear_errors(args, message):
    with pytest.raises(ConfigError, match=message):
        parse(args)


def test_a_process_a_test_starts_imports_the_tree_the_tests_import(tmp_path):
    """From another working directory too: a compiled copy tested through a relative
    `PYTHONPATH`, not the checkout installed in the venv (tests/conftest.py)."""
    code = "import pushserver.core.hub as hub; print(hub.__file__)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == pushserver.core.hub.__file__


def test_command_line_help_and_errors():
    out = subprocess.run(
        [sys.executable, "-m", "pushserver", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in (
        "--host",
        "--port",
        "--loop",
        "--history-size",
        "--history-ttl",
        "--heartbeat",
        "--max-buffer-bytes",
        "--gc-threshold",
        "--shutdown-timeout",
        "--redis",
        "--workers",
        "--publish-key",
        "--config",
        "PUSHSERVER_PUBLISH_KEY",
    ):
        assert flag in out, flag
    bad = subprocess.run(
        [sys.executable, "-m", "pushserver", "--workers", "3"], capture_output=True, text=True
    )
    assert bad.returncode != 0
    assert bad.stderr.strip().splitlines() == [
        "pushserver: error: --workers > 1 needs --redis: worker processes share channels only "
        "through Redis"
    ]


def test_env_and_asyncio_loop_start():
    env = {**os.environ, "PUSHSERVER_LOOP": "asyncio", "PUSHSERVER_HEARTBEAT": "2"}
    with ServerProcess(env=env) as srv:
        assert "asyncio loop" in srv.log
        stats = json.load(urllib.request.urlopen(f"{srv.url}/stats"))
        assert stats["heartbeat"] == 2.0


async def test_connections_leave_no_cyclic_garbage(server_factory):
    """Per-connection objects hold no reference cycles: with the collector run often, hundreds
    of finished connections on every transport leave (next to) nothing for it to find."""
    srv = server_factory("--gc-threshold", "100,10,10")
    per_transport = 150
    async with aiohttp.ClientSession() as s:
        before = (await wait_for_stats(s, srv.url, lambda st: True, "stats"))["gc"]["collected"]
        for n in range(per_transport):
            channel = f"cyc{n % 10}"
            async with s.get(f"{srv.url}/lp/{channel}", params={"timeout": "0"}) as r:
                await r.read()
            for kind in ("stream", "sse"):
                async with s.get(f"{srv.url}/{kind}/{channel}") as r:
                    await r.content.readline()
            async with s.ws_connect(f"{srv.url}/ws/{channel}"):
                pass
            await publish(s, srv.url, channel, n)
        stats = await wait_for_stats(
            s, srv.url, lambda st: st["connections"]["total"] == 0, "connections closed"
        )
    assert stats["gc"]["pauses"] > 0
    assert stats["gc"]["collected"] - before < per_transport


async def test_sigterm_lets_a_websocket_client_answer_the_close(server_factory):
    """The server's close (1012) is answered by the client before the server exits: the process
    waits for it (at most `CLOSE_TIMEOUT`), so the client's close never meets a reset that
    could destroy the server's close frame unread."""
    srv = server_factory("--shutdown-timeout", "10")
    reader, writer = await open_ws(srv.port, "/ws/bye-ws")
    async with aiohttp.ClientSession() as s:
        await wait_for_subscribers(s, srv.url, "bye-ws", 1)
    srv.proc.send_signal(signal.SIGTERM)
    frames = [await read_frame(reader)]
    while frames[-1][0] != CLOSE:
        frames.append(await read_frame(reader))
    assert json.loads(frames[0][1])["type"] == "reconnect"
    assert frames[-1][1][:2] == struct.pack("!H", 1012)
    loop = asyncio.get_running_loop()
    waiting = loop.time() + CLOSE_TIMEOUT / 2
    while loop.time() < waiting:  # the server lingers for the client's close
        assert srv.proc.poll() is None and " stopped" not in srv.log, srv.log
        await asyncio.sleep(0.05)
    writer.write(masked(CLOSE, frames[-1][1][:2]))
    assert await asyncio.wait_for(reader.read(), 10) == b""  # its FIN once both closed
    writer.close()
    assert await asyncio.to_thread(srv.proc.wait, 15) == 0
