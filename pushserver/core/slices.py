"""Long passes over many things (held streams, idle channels) a slice per loop turn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

T = TypeVar("T")


async def slices(items: list[T], size: int) -> AsyncIterator[list[T]]:
    """`items`, `size` at a time, with a loop turn between: what else is due runs in it."""
    for start in range(0, len(items), size):
        if start:
            await asyncio.sleep(0)
        yield items[start : start + size]
