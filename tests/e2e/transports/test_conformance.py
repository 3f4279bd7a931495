"""Replays the shared wire transcripts (tests/conformance/, see its README) through the Python
client's own units: line splitting, the NDJSON/SSE/WebSocket/long-poll parsers, error
classification, backoff and poll sizing. No server runs: the bytes are the server's.

Compressed cases are the HTTP stack's to decode (aiohttp), so they are replayed over a loopback
socket through the client's transports, one read at a time: each read is sent only once the
client has reported every event the reads before it completed."""

from __future__ import annotations

import asyncio
import base64
import json
import random
from itertools import pairwise
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pushclient.backoff import Backoff, Retries
from pushclient.errors import NetworkError, error_from_response, is_retryable, parse_retry_after
from pushclient.models import Gap, Message
from pushclient.pollsize import DEFAULT_CAP, PollLimit
from pushclient.transports.base import (
    Checkpoint,
    Connected,
    Event,
    Expired,
    LineSplitter,
    Reconnect,
    Transport,
    decode_event,
)
from pushclient.transports.longpoll import LongPollTransport, parse_answer
from pushclient.transports.sse import SSEParser, SSETransport
from pushclient.transports.stream import StreamTransport, ndjson_event
from pushclient.transports.ws import WebSocketTransport
from yarl import URL

from ...compressed import transcripts
from ...lockstep import Held, Lockstep

CASES_DIR = Path(__file__).resolve().parents[2] / "conformance"
NOT_SPOKEN = {"jsonp", "sse_compact"}
"""Transcript kinds this client never asks for: JSONP (for old browsers) and the compact SSE
framing (for EventSource)."""


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text("utf-8"))


CASES = {path.stem: load(path) for path in sorted(CASES_DIR.glob("*.json"))}


def compressed(case: dict[str, Any]) -> bool:
    return "content_encoding" in case or "extensions" in case


def of_kind(*kinds: str, encoded: bool = False) -> list[str]:
    """Names of the cases of `kinds`, of those whose bytes are compressed with `encoded`."""
    return [
        name
        for name, case in CASES.items()
        if case["kind"] in kinds and compressed(case) == encoded
    ]


def normal(event: Event) -> dict[str, Any]:
    """An event in the transcripts' notation."""
    match event:
        case Message():
            fields = {"channel": event.channel, "id": event.id, "ts": event.ts, "data": event.data}
            return {"message": {**fields, "cursor": event.cursor}}
        case Gap():
            fields = {"channel": event.channel, "from": event.from_id, "to": event.to_id}
            return {"gap": {**fields, "reason": event.reason, "cursor": event.cursor}}
        case Reconnect():
            return {"reconnect": {"cursor": event.cursor}}
        case Expired():
            return {"expired": {}}
        case Checkpoint():
            return {"checkpoint": event.cursor}
    raise AssertionError(f"not an event of the transcripts: {event!r}")


def reads(case: dict[str, Any]) -> list[bytes]:
    """The body in the pieces a client reads it in."""
    body = case["body"].encode()
    edges = [0, *case["splits"], len(body)]
    return [body[start:end] for start, end in pairwise(edges)]


def line_events(case: dict[str, Any], parse_line: Any) -> list[Event]:
    splitter = LineSplitter()
    lines = [line for chunk in reads(case) for line in splitter.feed(chunk)]
    return [event for line in lines if (event := parse_line(line)) is not None]


def replay(case: dict[str, Any]) -> list[Event]:
    """Feed one transcript to the parser of its kind."""
    match case["kind"]:
        case "longpoll":
            return parse_answer(case["body"].encode())
        case "ndjson":
            return line_events(case, ndjson_event)
        case "sse":
            return line_events(case, SSEParser().line)
        case "websocket":
            frames = (decode_event(frame.encode()) for frame in case["frames"])
            return [event for event in frames if event is not None]
    raise AssertionError(f"no parser for {case['kind']}")


def test_every_transcript_is_replayed_or_names_a_transport_this_client_lacks() -> None:
    kinds = {case["kind"] for case in CASES.values()}
    replayed = {"longpoll", "ndjson", "sse", "websocket", "error"}
    vectors = {"retry_after", "backoff", "backoff_sequence", "poll_limit"}
    assert kinds <= replayed | vectors | NOT_SPOKEN
    assert len(of_kind("longpoll", "ndjson", "sse", "websocket")) >= 10
    assert len(of_kind("longpoll", "ndjson", "sse", "websocket", encoded=True)) >= 4


@pytest.mark.parametrize("name", of_kind("longpoll", "ndjson", "sse", "websocket"))
def test_body_gives_the_events_the_transcript_expects(name: str) -> None:
    case = CASES[name]
    if "error" in case:
        with pytest.raises(NetworkError):
            replay(case)
    else:
        assert [normal(event) for event in replay(case)] == case["expect"]


@pytest.mark.parametrize("name", of_kind("error"))
def test_error_answer_is_classified_as_the_transcript_says(name: str) -> None:
    case = CASES[name]
    error = error_from_response(case["status"], case["body"].encode(), case["headers"])
    expect = case["expect"]
    assert error.status == case["status"]
    assert error.code == expect["code"]
    if expect["message"] is not None:
        assert error.message == expect["message"]
    assert ("retry" if is_retryable(error) else "final") == expect["action"]
    assert error.retry_after == expect["retry_after"]


@pytest.mark.parametrize("name", of_kind("retry_after"))
def test_retry_after_values(name: str) -> None:
    for vector in CASES[name]["vectors"]:
        assert parse_retry_after({"Retry-After": vector["header"]}) == vector["seconds"], vector


@pytest.mark.parametrize("name", of_kind("backoff"))
def test_backoff_defaults_and_bounds(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    backoff = Backoff()
    numbers = (backoff.initial, backoff.factor, backoff.maximum, backoff.jitter)
    assert numbers == (case["initial"], case["factor"], case["maximum"], case["jitter"])
    for vector in case["bounds"]:
        assert backoff.bounds(vector["attempt"]) == pytest.approx((vector["low"], vector["high"]))
    for vector in case["with_retry_after"]:
        delays = []
        for pick in (min, max):  # the random draw at each end of its range
            monkeypatch.setattr(random, "uniform", lambda a, b, pick=pick: pick(a, b))
            delays.append(backoff.delay(vector["attempt"], vector["retry_after"]))
        assert delays == pytest.approx([vector["low"], vector["high"]]), vector


@pytest.mark.parametrize("name", of_kind("backoff_sequence"))
def test_progress_restarts_the_retry_count(name: str) -> None:
    for sequence in CASES[name]["sequences"]:
        retries = Retries(Backoff())
        numbers = []
        for attempt in sequence["attempts"]:
            if attempt == "progress":
                retries.progress()
            retries.failed()
            numbers.append(retries.failures)
        assert numbers == sequence["retries"], sequence


@pytest.mark.parametrize("name", of_kind("poll_limit"))
def test_poll_limit_follows_cut_and_whole_answers(name: str) -> None:
    case = CASES[name]
    assert DEFAULT_CAP == PollLimit().value == case["default_cap"]
    for sequence in case["sequences"]:
        limit = PollLimit(sequence["cap"])
        seen = []
        for poll in sequence["polls"]:
            if poll == "cut":
                limit.cut_short()
            elif poll == "whole":
                limit.arrived()
            seen.append(limit.value)
        assert seen == sequence["limits"], sequence


# -- compressed cases, over a socket --------------------------------------------------------


def test_compressed_transcripts_are_what_the_servers_scheme_builds() -> None:
    """`python -m tests.compressed` writes them again when the scheme changes."""
    for case in transcripts():
        assert CASES[str(case["case"])] == json.loads(json.dumps(case)), case["case"]


TRANSPORTS: dict[str, type[Transport]] = {
    "sse": SSETransport,
    "ndjson": StreamTransport,
    "websocket": WebSocketTransport,
}
HEADS = {
    "sse": "text/event-stream",
    "ndjson": "application/x-ndjson",
    "longpoll": "application/json",
}


async def wait_until(what: str, check: Any, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)  # polling with a deadline, not waiting blind


async def serve_reads(held: Held, case: dict[str, Any], events: list[Event]) -> None:
    """The case's reads as chunks of a gzip-encoded answer, each once the client has what the
    reads before it completed."""
    held.send(
        held.head(
            "200 OK",
            [
                ("Content-Type", HEADS[case["kind"]]),
                ("Content-Encoding", case["content_encoding"]),
                ("Transfer-Encoding", "chunked"),
            ],
        )
    )
    body = base64.b64decode(case["body_base64"])
    edges = [0, *case.get("splits", []), len(body)]
    delivered = case.get("delivered", [0] * (len(edges) - 1))
    for (start, end), count in zip(pairwise(edges), delivered, strict=True):
        held.send(b"%x\r\n%b\r\n" % (end - start, body[start:end]))
        await wait_until(f"{count} events", lambda count=count: len(messages(events)) >= count)
    if case.get("end", "complete") == "complete":
        held.send(b"0\r\n\r\n")
    else:
        held.abort()


async def serve_frames(held: Held, case: dict[str, Any], events: list[Event]) -> None:
    assert "permessage-deflate" in held.headers.get("sec-websocket-extensions", "")
    held.websocket_accept(case["extensions"])
    for count, payload in enumerate(map(base64.b64decode, case["frames_base64"]), 1):
        size = (
            bytes([len(payload)])
            if len(payload) < 126
            else b"\x7e%b" % len(payload).to_bytes(2, "big")
        )
        held.send(b"\xc1" + size + payload)
        await wait_until(f"{count} events", lambda count=count: len(messages(events)) >= count)
    held.send(b"\x88\x02\x03\xe8")


def messages(events: list[Event]) -> list[Event]:
    return [e for e in events if not isinstance(e, Connected)]


@pytest.mark.parametrize("name", of_kind("longpoll", "ndjson", "sse", "websocket", encoded=True))
async def test_compressed_answer_gives_each_event_as_its_bytes_arrive(name: str) -> None:
    case = CASES[name]
    kind = case["kind"]
    transport = LongPollTransport(0) if kind == "longpoll" else TRANSPORTS[kind]()
    events: list[Event] = []
    failure: list[BaseException] = []

    async def client(url: str) -> None:
        async with aiohttp.ClientSession() as session:
            try:
                async for event in transport.events(session, URL(url), {"cursor": "c"}, 20):
                    events.append(event)
            except (NetworkError, aiohttp.ClientError) as exc:
                failure.append(exc)

    with Lockstep() as server:
        reading = asyncio.create_task(client(f"{server.url}/{transport.path}/news"))
        held = await asyncio.to_thread(server.next)
        assert "gzip" in held.headers.get("accept-encoding", "") or kind == "websocket"
        if kind == "websocket":
            await serve_frames(held, case, events)
        else:
            await serve_reads(held, case, events)
        await asyncio.wait_for(reading, 20)
        held.close()
    assert [normal(event) for event in messages(events)] == case["expect"]
    assert bool(failure) == (case.get("end") == "cut"), failure
