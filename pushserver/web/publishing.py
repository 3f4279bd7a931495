"""The rules of publishing: who may publish now, how a body becomes messages, and the 201 body.
The front end reads the request (`front/publish.py`) and hands over plain values; nothing here
touches HTTP."""

from __future__ import annotations

from typing import Final

import orjson

from ..config import Settings
from ..core.broker import Item, new_item
from ..core.errors import InvalidInput, TooLarge, broker_down, draining
from ..core.idempotency import check_key
from ..core.messages import Message
from ..core.names import parse_channel
from . import ratelimit
from .auth import authorize
from .state import ServerState

_loads: Final = orjson.loads
_dumps: Final = orjson.dumps
"""orjson's functions, called per publish: compiled, read as this module's statics, not looked
up on the module by name per call (docs/performance.md, "Constants as constants")."""

BATCH_FACTOR: Final = 16
"""A batch body may be this many times `--max-message-bytes`."""


def admit(state: ServerState, remote: str | None, authorization: str | None) -> None:
    """Refuse a publish before its body is read: key (or loopback), rate, drain, broker."""
    authorize(remote, authorization, state.settings)
    ratelimit.enforce(state, remote)
    if state.draining:
        raise draining()
    if not state.hub.broker.healthy:
        raise broker_down(state.hub.broker.name)


def body_limit(settings: Settings, batch: bool) -> int:
    return settings.max_message_bytes * (BATCH_FACTOR if batch else 1)


def is_json(content_type: str) -> bool:
    """Whether a body of this media type (lower-cased, no parameters) is published as JSON."""
    return content_type == "application/json" or content_type.endswith("+json")


def encode_data(body: bytes, as_json: bool) -> bytes:
    """The message's `data` as compact JSON (one line, so NDJSON and SSE framing stay intact)."""
    if as_json:
        try:
            return _dumps(_loads(body))
        except orjson.JSONDecodeError as exc:
            raise InvalidInput("bad_json", f"body is not valid JSON: {exc}") from None
    try:
        return _dumps(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput("bad_utf8", "body is not valid UTF-8 text") from None


def one_item(channel: str, body: bytes, key: str | None, as_json: bool) -> list[Item]:
    """`POST /pub/{channel}`'s message once its body is read (`channel` already checked)."""
    key = check_key(key, "Idempotency-Key")
    return [new_item((channel, encode_data(body, as_json), key))]


def batch_items(body: bytes, settings: Settings, header_key: str | None) -> list[Item]:
    """`POST /pub`'s messages once its body is read, each validated before any is published.

    An `Idempotency-Key` header is refused rather than ignored: a client that retries the batch
    with it would publish it twice."""
    if header_key is not None:
        raise InvalidInput(
            "bad_idempotency_key",
            'POST /pub takes a key per item ("idempotency_key"), not an Idempotency-Key header',
        )
    try:
        items = _loads(body)
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
        data = _dumps(item["data"])
        if len(data) > settings.max_message_bytes:
            raise TooLarge(
                "too_large", f"item {n} is larger than {settings.max_message_bytes} bytes"
            )
        key = check_key(item.get("idempotency_key"), f"item {n}'s idempotency_key")
        batch.append(new_item((parse_channel(item["channel"]), data, key)))
    return batch


def created(published: list[tuple[Message, int]], batch: bool) -> bytes:
    """The 201 body: one receipt for `POST /pub/{channel}`, a list of them for `POST /pub`."""
    if batch:
        return b"[%b]" % b",".join([m.receipt(n) for m, n in published])
    [(message, subscribers)] = published
    return message.receipt(subscribers)


async def publish(state: ServerState, items: list[Item], batch: bool) -> bytes:
    """Publish `items` (from `one_item` or `batch_items`): the 201 body."""
    return created(await state.hub.publish(items), batch)
