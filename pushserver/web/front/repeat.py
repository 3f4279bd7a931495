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
MAX_REPEAT_BYTES = 4096
"""Longest head remembered: a device's poll is far shorter, and the table stays within
`MAX_REPEATS` times this whatever `--max-head-bytes` allows."""


class Again(Protocol):
    """What a handler made of a head, able to serve it again with another value."""

    @property
    def head(self) -> RequestHead: ...

    def again(self, conn: FrontProtocol, value: str) -> Awaitable[None] | None: ...


class Repeat:
    __slots__ = ("parsed", "prefix", "room", "suffix")

    def __init__(self, prefix: bytes, suffix: bytes, parsed: Again, room: int) -> None:
        self.prefix = prefix
        self.suffix = suffix
        self.parsed = parsed
        self.room = room
        """Longest value within `--max-line-size` (a longer one is parsed, and refused)."""

    def value(self, raw: bytes) -> str | None:
        """The value in `raw` (a whole head) when it is this head but for that value."""
        prefix, suffix = self.prefix, self.suffix
        if (
            not 0 <= len(raw) - len(prefix) - len(suffix) <= self.room
            or not raw.startswith(prefix)
            or not raw.endswith(suffix)
        ):
            return None
        value = raw[len(prefix) : len(raw) - len(suffix)]
        return value.decode("ascii") if PLAIN_VALUE.fullmatch(value) else None

    def holds(self, raw: bytes, value: str) -> bool:
        """Whether `raw` is exactly this head with `value` (ASCII, plain): `value` without a
        parse of `raw` (building the head to compare costs less than taking `raw` apart)."""
        return len(value) <= self.room and raw == self.prefix + value.encode() + self.suffix


class Repeats:
    """The repeats of one server's connections, one per distinct head."""

    __slots__ = ("max_line", "table")

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        """`--max-line-size`: the longest request target."""
        self.table: dict[tuple[bytes, bytes], Repeat] = {}

    def find(self, raw: bytes, head: RequestHead, name: str, parsed: Again) -> Repeat | None:
        """The repeat of `raw` varying in query parameter `name`, or None when the head does
        not allow one: no such parameter, a request target with encoded characters (whose
        bytes would not say what the parser makes of them), or a head too long to keep."""
        line = raw[: raw.find(b"\r\n")]
        if len(raw) > MAX_REPEAT_BYTES or b"%" in line or b"+" in line:
            return None
        span = _span(line, name.encode())
        if span is None or line[span[0] : span[1]].decode() != head.query.get(name):
            return None
        start, end = span
        prefix, suffix = raw[:start], raw[end:]
        table = self.table
        repeat = table.get((prefix, suffix))
        if repeat is None:
            if len(table) >= MAX_REPEATS:
                table.clear()
            room = self.max_line - (len(head.target) - (end - start))
            repeat = table[prefix, suffix] = Repeat(prefix, suffix, parsed, room)
        return repeat


def _span(line: bytes, key: bytes) -> tuple[int, int] | None:
    """Where the value of the query's first parameter `key` lies in the request line `line`,
    split as the head parser splits it (the query starts at the target's first `?`), when
    that value is plain."""
    target_end = line.rfind(b" ")
    mark = line.find(b"?", 0, target_end)
    if mark < 0:
        return None
    at = mark + 1
    for part in line[at:target_end].split(b"&"):
        if part.partition(b"=")[0] == key:
            if b"=" not in part or not PLAIN_VALUE.fullmatch(part, len(key) + 1):
                return None
            return at + len(key) + 1, at + len(part)
        at += len(part) + 1
    return None
