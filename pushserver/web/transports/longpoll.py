"""`GET /lp/{channels}`: answer at once with what is buffered after the cursor, or hold the
request until a message comes or the timeout passes. `?callback=` wraps the answer as JSONP.

A plain HTTP/1.1 keep-alive poll is a `DirectPoll`, answered on its socket by the fan-out and
handed off from aiohttp (see `handoff`) when it has waited a while; the rest (JSONP, HTTP/1.0,
CORS) wait in their handler as an `AwaitedPoll`."""

from __future__ import annotations

import asyncio
import re
import time

from aiohttp import web

from ...core.errors import InvalidInput
from ...core.subscription import AwaitedPoll, Bound, Start, Waiter
from ...wire.framing import longpoll_body
from ..direct import SentResponse, answers_directly, json_answer
from ..handoff import ProtocolFactory, give_back, hand_off, http_protocol_factory
from ..state import ServerState
from .common import begin, int_param, open_channels, subscribe_request

CALLBACK_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.]{0,63}")
HEADERS = {"Cache-Control": "no-cache, no-store"}


SECONDS_RE = re.compile(r"[0-9]{1,9}(\.[0-9]{1,9})?", re.ASCII)


def _timeout(request: web.Request, default: float, high: float) -> float:
    raw = request.query.get("timeout")
    if raw is None or raw == "":
        return default
    value = float(raw) if SECONDS_RE.fullmatch(raw) else -1.0
    if not 0 <= value <= high:
        raise InvalidInput("bad_timeout", f"?timeout must be seconds from 0 to {high:g}")
    return value


def _bound(request: web.Request, state: ServerState) -> Bound:
    """`?limit=N` events per answer (at least 1; above the server's cap it is the cap)."""
    cap = state.settings.longpoll_max_messages
    limit = int_param(request, "limit", cap, 1, 1 << 31)
    return Bound(min(limit, cap), state.settings.longpoll_max_bytes)


def _callback(request: web.Request) -> str | None:
    callback = request.query.get("callback")
    if callback is None:
        return None
    if not CALLBACK_RE.fullmatch(callback):
        raise InvalidInput("bad_parameter", "?callback must be a JavaScript identifier")
    return callback


def hold(state: ServerState, poll: Waiter, timeout: float) -> asyncio.TimerHandle:
    """Register a waiting poll and start its hold time; `let_go` undoes both and gives back the
    connection slot the poll took over from its request."""
    state.hub.add_waiter(poll)
    return asyncio.get_running_loop().call_later(timeout, poll.expire)


def let_go(state: ServerState, poll: Waiter, timer: asyncio.TimerHandle) -> None:
    timer.cancel()
    state.hub.remove_waiter(poll)
    state.hub.leave("longpoll", poll.remote)
    state.hub.release(poll.channels)


HAND_OFF_AFTER = 1.0
"""Seconds a direct poll waits in its handler before it is handed off. A poll answered sooner
(an active channel) costs no more than aiohttp's own keep-alive handling; one that waits longer
pays a hand-off and a give-back (about 40 µs) to hold 2.5 KB instead of 11 KB while it waits."""


class DirectPoll(Waiter, asyncio.Protocol):
    """A plain HTTP/1.1 keep-alive poll, answered with prebuilt bytes written to its socket.

    It waits in its handler (`future`) at first. Still waiting after `HAND_OFF_AFTER`, it is
    handed off (`future` is then None): it becomes the transport's protocol, and once answered
    its connection goes back to aiohttp (or is closed while the server drains).
    """

    __slots__ = ("answered", "future", "http", "received", "state", "timer", "transport")
    wrap = staticmethod(json_answer)

    def __init__(
        self, start: Start, bound: Bound, transport: asyncio.Transport, state: ServerState
    ) -> None:
        super().__init__(start, bound)
        self.transport = transport
        self.state = state
        self.future: asyncio.Future[None] | None = asyncio.get_running_loop().create_future()
        self.http: ProtocolFactory | None = None
        self.received = b""
        self.answered = False
        self.timer: asyncio.TimerHandle | None = None

    def resolve(self, body: bytes) -> None:
        self.send(json_answer(body))

    def send(self, answer: bytes) -> None:
        if self.answered:
            return
        self.answered = True
        if not self.transport.is_closing():
            self.transport.write(answer)
        future = self.future
        if future is None:
            # After the fan-out loop: the last waiter's answer should not wait for the others'.
            asyncio.get_running_loop().call_soon(self._give_back)
        elif not future.done():
            future.set_result(None)

    def idle(self) -> None:
        """Wake the handler to hand the poll off."""
        if self.future is not None and not self.future.done():
            self.future.set_result(None)

    def hand_off(self, request: web.Request) -> web.StreamResponse | None:
        self.future = None
        self.http = http_protocol_factory(request)
        return hand_off(request, self)

    def _give_back(self) -> None:
        assert self.timer is not None and self.http is not None
        let_go(self.state, self, self.timer)
        transport = self.transport
        if transport.is_closing():
            return
        if self.state.draining:
            transport.close()
            return
        give_back(transport, self.http, self.received)
        if self.received:
            transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        """The client's next request, sent early: kept for aiohttp, and reading paused so the
        client cannot make the server hold more than one read of it."""
        self.received += data
        self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answered:
            self.answered = True
            assert self.timer is not None
            let_go(self.state, self, self.timer)


async def wait_direct(request: web.Request, poll: DirectPoll, timeout: float) -> web.StreamResponse:
    """Wait in the handler, then (still waiting) hand the poll off."""
    state = poll.state
    poll.timer = timer = hold(state, poll, timeout)
    assert poll.future is not None
    idle = asyncio.get_running_loop().call_later(HAND_OFF_AFTER, poll.idle)
    try:
        await poll.future
    except BaseException:  # the client went away: the handler is cancelled
        let_go(state, poll, timer)
        raise
    finally:
        idle.cancel()
    if not poll.answered:
        handed = poll.hand_off(request)
        if handed is not None:
            return handed
    let_go(state, poll, timer)
    return SentResponse()


async def handle(request: web.Request) -> web.StreamResponse:
    sub_req = subscribe_request(request, "longpoll")
    state = sub_req.state
    try:
        timeout = _timeout(request, state.settings.default_timeout, state.settings.max_timeout)
        if sub_req.expires is not None:  # answered, with its cursor, when its token expires
            timeout = min(timeout, max(0.0, sub_req.expires - time.time()))
        callback = _callback(request)
        bound = _bound(request, state)
        channels = await open_channels(sub_req)
        poll: Waiter
        if answers_directly(request):
            poll, events = begin(sub_req, channels, DirectPoll, bound, request.transport, state)
        else:
            poll, events = begin(sub_req, channels, AwaitedPoll, bound)
        if events or timeout == 0:
            state.hub.release(poll.channels)  # answered at once: nothing stays held
            body = poll.answer(events)[0] if events else longpoll_body([], poll.cursor)
        else:
            sub_req.hand_over()  # to the held poll, whose `let_go` gives the slot back
            if isinstance(poll, DirectPoll):
                return await wait_direct(request, poll, timeout)
            assert isinstance(poll, AwaitedPoll)
            timer = hold(state, poll, timeout)
            try:
                body = await poll.future
            finally:
                let_go(state, poll, timer)
    finally:
        sub_req.release()
    if callback is None:
        return web.Response(body=body, content_type="application/json", headers=HEADERS)
    return web.Response(
        body=b"%b(%b);" % (callback.encode(), body),
        content_type="application/javascript",
        headers=HEADERS,
    )
