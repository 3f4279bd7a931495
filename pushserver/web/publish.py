"""`POST /pub/{channel}` and `POST /pub`: validate everything, then publish through the broker."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from ..core.broker import Item
from ..core.errors import InvalidInput, TooLarge, broker_down, draining
from ..core.idempotency import check_key
from ..core.messages import Message
from ..core.names import parse_channel
from . import ratelimit
from .auth import check_publisher
from .state import STATE, ServerState


async def read_body(request: web.Request, limit: int) -> bytes:
    """The whole body, refusing with 413 as soon as it passes `limit` bytes."""
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> TooLarge:
    return TooLarge("too_large", f"message body is larger than {limit} bytes")


def _is_json(request: web.Request) -> bool:
    ctype = request.content_type.lower()
    return ctype == "application/json" or ctype.endswith("+json")


def encode_data(body: bytes, as_json: bool) -> bytes:
    """The message's `data` as compact JSON (one line, so NDJSON and SSE framing stay intact)."""
    if as_json:
        try:
            return orjson.dumps(orjson.loads(body))
        except orjson.JSONDecodeError as exc:
            raise InvalidInput("bad_json", f"body is not valid JSON: {exc}") from None
    try:
        return orjson.dumps(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput("bad_utf8", "body is not valid UTF-8 text") from None


def _prepare(request: web.Request) -> ServerState:
    state = request.app[STATE]
    check_publisher(request, state.settings)
    ratelimit.enforce(request)
    if state.draining:
        raise draining()
    if not state.hub.broker.healthy:
        raise broker_down(state.hub.broker.name)
    return state


def _result(message: Message, subscribers: int) -> dict[str, Any]:
    return {
        "channel": message.channel,
        "id": message.id,
        "ts": round(message.ts, 6),
        "subscribers": subscribers,
    }


def _created(payload: Any) -> web.Response:
    return web.Response(status=201, body=orjson.dumps(payload), content_type="application/json")


async def publish_one(request: web.Request) -> web.Response:
    state = _prepare(request)
    channel = parse_channel(request.match_info["channel"])
    body = await read_body(request, state.settings.max_message_bytes)
    key = check_key(request.headers.get("Idempotency-Key"), "Idempotency-Key")
    data = encode_data(body, _is_json(request))
    [(message, subscribers)] = await state.hub.publish([Item(channel, data, key)])
    return _created(_result(message, subscribers))


async def publish_batch(request: web.Request) -> web.Response:
    state = _prepare(request)
    settings = state.settings
    body = await read_body(request, settings.max_message_bytes * 16)
    try:
        items = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput("bad_json", f"body is not valid JSON: {exc}") from None
    if not isinstance(items, list) or not 1 <= len(items) <= settings.max_batch:
        raise InvalidInput(
            "bad_batch", f"body must be a JSON array of 1 to {settings.max_batch} items"
        )
    batch = []
    for n, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("channel"), str):
            raise InvalidInput("bad_batch", f'item {n} must be {{"channel": name, "data": value}}')
        if "data" not in item:
            raise InvalidInput("bad_batch", f'item {n} has no "data"')
        data = orjson.dumps(item["data"])
        if len(data) > settings.max_message_bytes:
            raise TooLarge(
                "too_large", f"item {n} is larger than {settings.max_message_bytes} bytes"
            )
        key = check_key(item.get("idempotency_key"), f"item {n}'s idempotency_key")
        batch.append(Item(parse_channel(item["channel"]), data, key))
    published = await state.hub.publish(batch)
    return _created([_result(m, n) for m, n in published])
