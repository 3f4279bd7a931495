"""Every transport of the Python client through a link that drops every few kilobytes: a
proxy cutting each connection after a random 300-3,000 bytes, 300 messages at ~100/s, history
1,000. Each message must arrive exactly once, in order, within 60 s (a deadline, not a timing
check). The scenario lives in `tests.lossy`, which other clients' runners start as a command."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from pushclient import PushClient

from ...lossy import CHANNEL, MESSAGES, lossy_link, problems, receive_with_pushclient

DEADLINE = 60.0
TRANSPORTS = ["longpoll", "stream", "sse", "ws"]
HEAD = {t: b"HTTP/1.1 101" if t == "ws" else b"HTTP/1.1 200" for t in TRANSPORTS}
COMPRESSED = {
    "longpoll": b"\r\nVary: Accept-Encoding\r\n",
    "stream": b"\r\nContent-Encoding: gzip\r\n",
    "sse": b"\r\nContent-Encoding: gzip\r\n",
    "ws": b"\r\nSec-WebSocket-Extensions: permessage-deflate;",
}
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_message_once_in_order_through_a_cutting_proxy(transport):
    async with lossy_link(seed=7) as link:
        got = await receive_with_pushclient(link, transport, DEADLINE)
        cuts = link.proxy.cuts
        answers = link.proxy.answers
    assert problems(got.envelopes) == []
    assert cuts > 0, "the proxy never cut a connection"
    # compressed, as the client asks and the server does by default (a poll's answer only
    # from 512 bytes, but every one says it could have been)
    mark = COMPRESSED[transport]
    assert all(mark in answer for answer in answers if answer.startswith(HEAD[transport]))
    assert any(answer.startswith(HEAD[transport]) for answer in answers)
    print(f"{transport}: {MESSAGES} messages in {got.seconds:.2f} s through {cuts} cuts")


async def test_serve_command_publishes_on_request_and_check_command_judges(tmp_path):
    """The flow another client's runner follows: `serve`, subscribe, `publish`, `check`."""
    serve = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.lossy",
        "serve",
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert serve.stdin is not None and serve.stdout is not None
    try:
        setup = json.loads(await asyncio.wait_for(serve.stdout.readline(), DEADLINE))
        received: list[dict] = []
        async with (
            PushClient(setup["url"], heartbeat=20.0) as client,
            client.subscribe(setup["channel"], transport="stream", cursor=setup["cursor"]) as sub,
        ):
            serve.stdin.write(b"publish\n")
            async with asyncio.timeout(DEADLINE):
                async for m in sub:
                    received.append({"channel": m.channel, "id": m.id, "data": m.data})
                    if len(received) == setup["messages"]:
                        break
            done = json.loads(await asyncio.wait_for(serve.stdout.readline(), DEADLINE))
        assert done == {"published": MESSAGES}
    finally:
        serve.stdin.close()
        await asyncio.wait_for(serve.wait(), DEADLINE)
    assert setup["channel"] == CHANNEL
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text("".join(json.dumps(e) + "\n" for e in received))
    bad.write_text("".join(json.dumps(e) + "\n" for e in received[:10] + received[9:]))
    for path, code in ((good, 0), (bad, 1)):
        check = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.lossy", "check", str(path), cwd=ROOT
        )
        assert await check.wait() == code
