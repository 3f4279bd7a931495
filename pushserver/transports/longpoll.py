"""`GET /lp/{channels}`: answer at once with what is buffered after the cursor, or hold the
request until a message comes or the timeout passes. `?callback=` wraps the answer as JSONP."""

from __future__ import annotations

import asyncio
import re

from aiohttp import web

from ..direct import SentResponse, direct_transport
from ..errors import bad_request
from ..frames import longpoll_body
from ..subscriber import Waiter
from .common import begin, open_channels, subscribe_request

CALLBACK_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.]{0,63}")
HEADERS = {"Cache-Control": "no-cache, no-store"}


def _timeout(request: web.Request, default: float, high: float) -> float:
    raw = request.query.get("timeout")
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= high:
        raise bad_request("bad_timeout", f"?timeout must be seconds from 0 to {high:g}")
    return value


def _callback(request: web.Request) -> str | None:
    callback = request.query.get("callback")
    if callback is None:
        return None
    if not CALLBACK_RE.fullmatch(callback):
        raise bad_request("bad_parameter", "?callback must be a JavaScript identifier")
    return callback


async def handle(request: web.Request) -> web.StreamResponse:
    sub_req = subscribe_request(request, "longpoll")
    settings = sub_req.state.settings
    timeout = _timeout(request, settings.default_timeout, settings.max_timeout)
    callback = _callback(request)
    hub = sub_req.state.hub
    channels = await open_channels(sub_req)
    waiter, events = begin(sub_req, channels, Waiter, direct_transport(request))
    if events:
        body = waiter.answer(events)
    elif timeout == 0:
        body = longpoll_body([], waiter.cursor)
    else:
        hub.add_waiter(waiter)
        hub.enter("longpoll", sub_req.remote)
        timer = asyncio.get_running_loop().call_later(timeout, waiter.expire)
        try:
            body = await waiter.future
        finally:
            timer.cancel()
            hub.remove_waiter(waiter)
            hub.leave("longpoll", sub_req.remote)
            sub_req.state.broker.release(waiter.channels)
        if waiter.sent:
            return SentResponse()
    if callback is None:
        return web.Response(body=body, content_type="application/json", headers=HEADERS)
    return web.Response(
        body=b"%b(%b);" % (callback.encode(), body),
        content_type="application/javascript",
        headers=HEADERS,
    )
