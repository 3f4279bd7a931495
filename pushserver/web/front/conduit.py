"""What aiohttp's protocol takes for its transport when the front end passes it a request.

Writes go straight to the connection's real transport; closing the conduit closes the
connection. The front end marks it `detached` before it takes the connection back, so nothing
aiohttp does afterwards (its teardown, a keep-alive timer) reaches the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Protocol


class Owner(Protocol):
    """The side of the front end's connection a conduit talks to."""

    transport: asyncio.Transport

    def http_answered(self, keep_alive: bool) -> None: ...

    def http_closed(self, abort: bool) -> None: ...


class Conduit(asyncio.Transport):
    __slots__ = ("detached", "owner")

    def __init__(self, owner: Owner) -> None:
        super().__init__()
        self.owner = owner
        self.detached = False

    def answered(self, keep_alive: bool) -> None:
        """aiohttp's answer to the request it was given is complete (sent by the app's outermost
        middleware); `keep_alive` says whether the connection goes on."""
        if not self.detached:
            self.owner.http_answered(keep_alive)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self.detached:
            self.owner.transport.write(data)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        if not self.detached:
            self.owner.transport.writelines(list_of_data)

    def is_closing(self) -> bool:
        return self.detached or self.owner.transport.is_closing()

    def close(self) -> None:
        if not self.detached:
            self.detached = True
            self.owner.http_closed(abort=False)

    def abort(self) -> None:
        if not self.detached:
            self.detached = True
            self.owner.http_closed(abort=True)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.owner.transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        if not self.detached:
            self.owner.transport.pause_reading()

    def resume_reading(self) -> None:
        if not self.detached:
            self.owner.transport.resume_reading()

    def is_reading(self) -> bool:
        return not self.detached and self.owner.transport.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.owner.transport.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.owner.transport.get_write_buffer_limits()

    def get_write_buffer_size(self) -> int:
        return self.owner.transport.get_write_buffer_size()

    def can_write_eof(self) -> bool:
        return self.owner.transport.can_write_eof()

    def write_eof(self) -> None:
        if not self.detached:
            self.owner.transport.write_eof()
