"""`POST /pub/{channel}` and `POST /pub` as aiohttp serves them (a request the front end passes
on, e.g. one with a compressed body): read the body, then publish (`publishing`)."""

from __future__ import annotations

from aiohttp import web

from ..core.names import parse_channel
from . import publishing
from .state import STATE


async def read_body(request: web.Request, limit: int) -> bytes:
    """The whole body, refusing with 413 as soon as it passes `limit` bytes."""
    if request.content_length is not None and request.content_length > limit:
        raise publishing.too_large(limit)
    chunks, size = [], 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise publishing.too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _created(body: bytes) -> web.Response:
    return web.Response(status=201, body=body, content_type="application/json")


async def publish_one(request: web.Request) -> web.Response:
    state = request.app[STATE]
    publishing.admit(state, request.remote, request.headers.get("Authorization"))
    channel = parse_channel(request.match_info["channel"])
    body = await read_body(request, publishing.body_limit(state.settings, batch=False))
    key = request.headers.get("Idempotency-Key")
    as_json = publishing.is_json(request.content_type.lower())
    items = publishing.one_item(channel, body, key, as_json)
    return _created(await publishing.publish(state, items, batch=False))


async def publish_batch(request: web.Request) -> web.Response:
    state = request.app[STATE]
    publishing.admit(state, request.remote, request.headers.get("Authorization"))
    body = await read_body(request, publishing.body_limit(state.settings, batch=True))
    items = publishing.batch_items(body, state.settings, request.headers.get("Idempotency-Key"))
    return _created(await publishing.publish(state, items, batch=True))
