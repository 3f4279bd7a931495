"""Blocking wrappers for scripts without an event loop; the async API is the real one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import Any

from .client import PushClient
from .models import Gap, Message, PublishResult


def publish(url: str, channel: str, data: Any, *, publish_key: str | None = None) -> PublishResult:
    """Publish one message and wait for the receipt."""

    async def run() -> PublishResult:
        async with PushClient(url, publish_key=publish_key) as client:
            return await client.publish(channel, data)

    return asyncio.run(run())


def subscribe(
    url: str,
    channels: str | Iterable[str],
    *,
    transport: str = "sse",
    cursor: str | None = None,
    history: int = 0,
    token: str | None = None,
    **client_options: Any,
) -> Iterator[Message | Gap]:
    """Yield messages and gaps as `PushClient.subscribe` does, blocking between them.

    Runs its own event loop: call it from plain threads, not from async code. `close()` the
    iterator (or let a `for` loop finish) to drop the connection.
    """
    with asyncio.Runner() as runner:
        client = PushClient(url, **client_options)
        subscription = client.subscribe(
            channels, transport=transport, cursor=cursor, history=history, token=token
        )

        async def next_item() -> Message | Gap:
            return await anext(subscription)

        try:
            while True:
                yield runner.run(next_item())
        finally:
            runner.run(subscription.aclose())
            runner.run(client.close())
