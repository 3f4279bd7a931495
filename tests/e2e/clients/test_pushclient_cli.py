"""`pushclient sub` / `pushclient pub` as a user runs them: real processes, a real server."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys

import orjson
from pushclient import PushClient

WAIT = 30.0
KEY_ENV = "PUSHSERVER_PUBLISH_KEY"


async def run(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None):
    """Run `pushclient ARGS` to completion; returns (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        *command(*args),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(env),
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), WAIT)
    return proc.returncode, out.decode(), err.decode()


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pushclient", *args]


def environment(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    return {**env, **(extra or {})}


def assert_one_clear_line(code: int, err: str, *words: str) -> None:
    assert code != 0
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0]


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


async def sub_until_interrupted(
    *args: str, lines: int, sig: int = signal.SIGINT
) -> tuple[list[str], int, str]:
    """Start `pushclient sub`, read `lines` lines, then Ctrl-C it (or send `sig`).

    It starts with SIGINT ignored, as `cmd &` from a script (or a test run in the background)
    leaves it, and must stop on the signal all the same.
    """
    proc = await asyncio.create_subprocess_exec(
        *command("sub", *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(None),
        preexec_fn=ignore_sigint,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        got = [
            (await asyncio.wait_for(proc.stdout.readline(), WAIT)).decode().rstrip("\n")
            for _ in range(lines)
        ]
        proc.send_signal(sig)
        err = (await asyncio.wait_for(proc.stderr.read(), WAIT)).decode()
        code = await asyncio.wait_for(proc.wait(), WAIT)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return got, code, err


async def test_pushclient_cli_pub_then_sub_then_resume(server):
    code, out, err = await run("pub", server.url, "cli", "hello world")
    assert (code, err) == (0, "")
    receipt = orjson.loads(out)
    assert (receipt["channel"], receipt["id"], receipt["subscribers"]) == ("cli", 1, 0)

    got, code, err = await sub_until_interrupted(server.url, "cli", "--history", "1", lines=1)
    assert got == ["cli #1 hello world"]
    assert code == 130 and "Traceback" not in err
    cursor = err.split("--cursor ")[1].split()[0]

    code, _, _ = await run("pub", server.url, "cli", "--json", '{"n": 2}')
    assert code == 0
    code, _, _ = await run("pub", server.url, "cli", "-", stdin=b"from stdin\n")
    assert code == 0
    got, code, err = await sub_until_interrupted(
        server.url,
        "cli",
        "--cursor",
        cursor,
        "--json",
        "--transport",
        "stream",
        lines=2,
        sig=signal.SIGTERM,
    )
    envelopes = [orjson.loads(line) for line in got]
    assert [(e["id"], e["data"]) for e in envelopes] == [(2, {"n": 2}), (3, "from stdin")]
    assert code == 143 and "Traceback" not in err
    assert f"--cursor {envelopes[-1]['cursor']}" in err


async def test_pushclient_cli_prints_gaps(server_factory):
    server = server_factory("--history-size", "2")
    async with PushClient(server.url) as client:
        await client.publish("short", "first")
        async with client.subscribe("short", history=1) as subscription:
            cursor = (await asyncio.wait_for(anext(subscription), WAIT)).cursor
        await client.publish_many([("short", "second"), ("short", "third"), ("short", "fourth")])
    got, code, _ = await sub_until_interrupted(
        server.url, "short", "--cursor", cursor, "--transport", "longpoll", lines=3
    )
    assert got == ["short GAP (expired): lost #2..#2", "short #3 third", "short #4 fourth"]
    assert code == 130


async def test_pushclient_cli_reports_bad_input_in_one_line(server_factory):
    server = server_factory("--publish-key", "sesame")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    key = {KEY_ENV: "sesame"}
    cases = {
        ("pub", "not-a-url", "c", "x"): "bad_url",
        ("sub", closed, "c"): "cannot reach",
        ("sub", server.url, "bad channel"): "bad_channel",
        ("pub", server.url, "c", "x"): "401",  # no key
        ("pub", server.url, "c", "x", "--key", "wrong"): "401",
    }
    results = await asyncio.gather(
        *(run(*args) for args in cases),
        run("pub", server.url, "c", "--json", "{oops", env=key),
        run("pub", server.url, "c", "x", env=key),
        run("pub", server.url),
    )
    for (code, _, err), word in zip(results, [*cases.values(), "--json"], strict=False):
        assert_one_clear_line(code, err, word)
    code, out, err = results[-2]
    assert (code, err) == (0, "")
    assert orjson.loads(out)["id"] == 1
    code, _, err = results[-1]
    assert code == 2 and "usage:" in err and "Traceback" not in err
