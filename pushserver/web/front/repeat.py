"""A request head a connection sent before, but for one query value (a long-poll's cursor).

A long-poll client sends the same head again and again with only its cursor changed. Its
connection keeps a `Repeat` of the last such head: the bytes before and after the value, and
what the handler made of the rest. The next head with those bytes around a plain value is
served from that, without parsing it again. Repeats are shared by every connection that sent
the same bytes (`Repeats`), so thousands of held polls from one kind of client keep one.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol

from .head import RequestHead

if TYPE_CHECKING:
    from .protocol import FrontProtocol

PLAIN_VALUE = re.compile(rb"[\x21\x22\x24\x27-\x2a\x2c-\x7e]*")
"""A query value as sent, with nothing a parser would decode or split on (no `%`, `+`, `&`,
`#` or space)."""

MAX_REPEATS = 4096
"""Distinct heads remembered; past it the table starts again (connections keep theirs)."""


class Again(Protocol):
    """What a handler made of a head, able to serve it again with another value."""

    @property
    def head(self) -> RequestHead: ...

    def again(self, conn: FrontProtocol, value: str) -> Awaitable[None] | None: ...


class Repeat:
    __slots__ = ("parsed", "prefix", "suffix")

    def __init__(self, prefix: bytes, suffix: bytes, parsed: Again) -> None:
        self.prefix = prefix
        self.suffix = suffix
        self.parsed = parsed

    def value(self, raw: bytes) -> str | None:
        """The value in `raw` (a whole head) when it is this head but for that value."""
        prefix, suffix = self.prefix, self.suffix
        if (
            len(raw) < len(prefix) + len(suffix)
            or not raw.startswith(prefix)
            or not raw.endswith(suffix)
        ):
            return None
        value = raw[len(prefix) : len(raw) - len(suffix)]
        return value.decode("ascii") if PLAIN_VALUE.fullmatch(value) else None

    def holds(self, raw: bytes, value: str) -> bool:
        """Whether `raw` is exactly this head with `value` (ASCII, plain): `value` without a
        parse of `raw` (building the head to compare costs less than taking `raw` apart)."""
        return raw == self.prefix + value.encode() + self.suffix


class Repeats:
    """The repeats of one server's connections, one per distinct head."""

    __slots__ = ("table",)

    def __init__(self) -> None:
        self.table: dict[tuple[bytes, bytes], Repeat] = {}

    def find(self, raw: bytes, head: RequestHead, name: str, parsed: Again) -> Repeat | None:
        """The repeat of `raw` varying in query parameter `name`, or None when the head does
        not allow one: no such parameter, or a request target with encoded characters (whose
        bytes would not say what the parser makes of them)."""
        line = raw[: raw.find(b"\r\n")]
        if b"%" in line or b"+" in line:
            return None
        key = name.encode()
        starts = [line.find(sep + key + b"=") for sep in (b"?", b"&")]
        found = [i for i in starts if i >= 0]
        if not found:
            return None
        start = min(found) + len(key) + 2
        plain = PLAIN_VALUE.match(line, start)
        assert plain is not None  # it matches the empty string
        end = plain.end()
        if end == len(line) or line[end] not in b"& " or plain[0].decode() != head.query[name]:
            return None
        prefix, suffix = raw[:start], raw[end:]
        table = self.table
        repeat = table.get((prefix, suffix))
        if repeat is None:
            if len(table) >= MAX_REPEATS:
                table.clear()
            repeat = table[prefix, suffix] = Repeat(prefix, suffix, parsed)
        return repeat
