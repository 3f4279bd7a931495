"""Replays the shared wire transcripts (tests/conformance/, see its README) through the Python
client's own units: line splitting, the NDJSON/SSE/WebSocket/long-poll parsers, error
classification, backoff and poll sizing. No server runs: the bytes are the server's."""

from __future__ import annotations

import json
import random
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from pushclient.backoff import Backoff, Retries
from pushclient.errors import NetworkError, error_from_response, is_retryable, parse_retry_after
from pushclient.models import Gap, Message
from pushclient.pollsize import DEFAULT_CAP, PollLimit
from pushclient.transports.base import (
    Checkpoint,
    Event,
    Expired,
    LineSplitter,
    Reconnect,
    decode_event,
)
from pushclient.transports.longpoll import parse_answer
from pushclient.transports.sse import SSEParser
from pushclient.transports.stream import ndjson_event

CASES_DIR = Path(__file__).resolve().parent / "conformance"
NOT_SPOKEN = {"jsonp"}
"""Transcript kinds of a transport this client does not have (JSONP is for old browsers)."""


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text("utf-8"))


CASES = {path.stem: load(path) for path in sorted(CASES_DIR.glob("*.json"))}


def of_kind(*kinds: str) -> list[str]:
    return [name for name, case in CASES.items() if case["kind"] in kinds]


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
