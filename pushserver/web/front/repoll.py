"""The re-poll fast path: a request head a connection sent before, served without parsing it,
and a long-poll's next poll held with the poll it answered (`Repolls`, the part of
`connection.Connection` that does this).

Why, measured (docs/performance.md, "The front end" and "Long-poll at nchan's cost"): a
long-poll client sends the same head again and again with only its cursor changed.
- A connection keeps a `Repeat` of its last poll head: the bytes before and after the cursor's
  value, and what the handler made of the rest (`Again`). The next head with those bytes
  around a plain value is served from that: no httptools, no query, no channel names, no token
  check (a token within a second of its expiry is checked again). Repeats are shared by every
  connection that sent the same bytes (`Repeats`), so 20,000 pollers of one channel keep one.
  A publisher's head, sent again and again with only its `Content-Length` changed (bodies of
  any length: a quote, a chat line), is remembered the same way, varying in that value
  (`Sized`): before, a publisher whose bodies changed length had every head parsed (9 of the
  58 us a publish cost the server, docs/performance.md, "The publish path in Python").
- An answered plain one-channel poll stays with its connection (`keep`, `Kept`); the re-poll
  at its channel's head holds that same poll again: nothing opened, looked up or built.
  `repoll.py 2000 50`: 4.75-5.2 us of server Python per delivery before, 3.37-3.42 us after.
- That re-poll is matched against the remembered head's bytes with the cursor the kept poll
  awaits (`Repeat.holds`, `Kept.awaits`) before anything is buffered or parsed
  (`Repolls._serve_kept`): on an idle connection when it is one whole read, or once the
  answered poll is done with when the bytes kept meanwhile are that re-poll and nothing else.
- A cursor may come percent-encoded (`encodeURIComponent`, Java's `URLEncoder`: `:` as `%3A`).
  A repeat learns from its first head which characters the client escapes, and how
  (`Escapes`), and builds the head it compares with the same way; a value is decoded as the
  parser would. Measured (`pushserver-bench --encode-cursor`, 19,900 polls): 33.8 us of
  server CPU per delivery when such a re-poll was parsed in full, against 13.3 plain.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Final, Protocol
from urllib.parse import unquote

from mypy_extensions import mypyc_attr

from ..http.request import RequestHead
from . import DONE
from .bodies import Bodies

if TYPE_CHECKING:
    from ..transports.exchange import Exchange, Kept
    from .base import Serve

PLAIN_VALUE: Final = re.compile(rb"[\x21\x22\x24\x27-\x2a\x2c-\x7e]*")
"""A query value as sent, with nothing a parser would decode or split on (no `%`, `+`, `&`,
`#` or space)."""
SENT_VALUE: Final = re.compile(rb"(?:[\x21\x22\x24\x27-\x2a\x2c-\x7e]|%[0-9A-Fa-f]{2})*")
"""A query value as sent that the parser only percent-decodes: plain, or with `%XX` escapes."""
ESCAPE: Final = re.compile(r"%[0-9A-Fa-f]{2}")
LENGTH_FIELD: Final = b"\r\ncontent-length:"
LENGTH_VALUE: Final = re.compile(rb"[ \t]*([0-9]{1,18})[ \t]*\r\n")
"""A `Content-Length` field's value as a `Sized` repeat takes it: digits, at most 18 (an
int64; llhttp refuses more)."""

Escapes = dict[int, str]
"""How a client escapes a value: each character it sends as `%XX`, by code point, to that
escape as it sends it (its case kept); `str.translate` applies it."""

MAX_REPEATS: Final = 4096
"""Distinct heads remembered; past it the table starts again (connections keep theirs)."""
MAX_REPEAT_BYTES: Final = 4096
"""Longest head remembered: a device's poll is far shorter, and the table stays within
`MAX_REPEATS` times this whatever `--max-head-bytes` allows."""


class Again(Protocol):
    """What a handler made of a head, able to serve it again with another value."""

    @property
    def head(self) -> RequestHead: ...

    def again(self, conn: Exchange, value: str) -> Awaitable[None] | None: ...


@mypyc_attr(allow_interpreted_subclasses=True)
class Repeat:
    """A head remembered but for one query value; a subclass may observe it (`Repeats`)."""

    __slots__ = (
        "awaited",
        "escapes",
        "expected",
        "fixed",
        "head",
        "parsed",
        "prefix",
        "room",
        "serve",
        "suffix",
    )

    def __init__(
        self, prefix: bytes, suffix: bytes, parsed: Again, room: int, escapes: Escapes
    ) -> None:
        self.prefix = prefix
        self.suffix = suffix
        self.fixed = len(prefix) + len(suffix)
        """The bytes of this head but its value."""
        self.parsed = parsed
        self.head = parsed.head
        self.serve: Serve = parsed.again
        """`parsed`'s head and its `again`, read once: by name, each read of a `Protocol`'s
        member costs a lookup, and a bound method is made for every read of `again`."""
        self.room = room
        """Longest value as sent within `--max-line-size` (a longer one is parsed, and refused)."""
        self.escapes = escapes
        """How this head's clients send a value (empty: as it is)."""
        self.awaited = ""
        self.expected = b""
        """This head with the value `holds` was last asked about (`awaited`)."""

    def sent(self, raw: bytes) -> bytes | None:
        """The value as sent in `raw` (a whole head) when it is this head but for that value."""
        size = len(raw) - self.fixed
        prefix, suffix = self.prefix, self.suffix
        if not 0 <= size <= self.room or not raw.startswith(prefix) or not raw.endswith(suffix):
            return None
        start = len(prefix)
        return raw[start : start + size]

    def value(self, raw: bytes) -> str | None:
        """The value in `raw` (a whole head) when it is this head but for that value."""
        value = self.sent(raw)
        if value is None:
            return None
        if PLAIN_VALUE.fullmatch(value):
            return value.decode("ascii")
        return unquote(value.decode("ascii")) if SENT_VALUE.fullmatch(value) else None

    def holds(self, raw: bytes, value: str) -> bool:
        """Whether `raw` is exactly this head with `value` (ASCII, plain), sent escaped as this
        head's clients escape it: `value` without a parse of `raw`. The head to compare with is
        built once per value: every kept poll of a channel awaits the same cursor string (its
        channel's `sent_position`), so after a fan-out all their re-polls are compared with one
        `bytes`, nothing allocated."""
        if value is not self.awaited:
            self.awaited = value
            sent = value.translate(self.escapes).encode() if self.escapes else value.encode()
            fits = len(sent) <= self.room
            self.expected = self.prefix + sent + self.suffix if fits else b""
        return raw == self.expected


class Same(Repeat):
    """A head repeated as it is (a publisher's without a `Content-Length`: chunked): no value
    varies."""

    __slots__ = ()

    def value(self, raw: bytes) -> str | None:
        return "" if raw == self.prefix else None


class Sized(Repeat):
    """A head repeated but for its `Content-Length` value (a publisher's, bodies of any
    length): the value is that length, as sent (digits)."""

    __slots__ = ()

    def value(self, raw: bytes) -> str | None:
        value = self.sent(raw)
        if value is None or not value.isdigit():  # bytes: ASCII digits only, at least one
            return None
        return value.decode("ascii")


class Repeats:
    """The repeats of one server's connections, one per distinct head."""

    __slots__ = ("kind", "max_line", "table")

    def __init__(self, max_line: int, kind: type[Repeat] = Repeat) -> None:
        self.max_line = max_line
        """`--max-line-size`: the longest request target."""
        self.kind = kind
        """The class of the repeats varying in a query value: a subclass observes them."""
        self.table: dict[tuple[str, bytes, bytes, str], Repeat] = {}

    def find(self, raw: bytes, head: RequestHead, name: str | None, parsed: Again) -> Repeat | None:
        """The repeat of `raw` varying in query parameter `name` (None: in its `Content-Length`
        value when it has one, else `raw` itself, its value always empty), or None when the
        head does not allow one: no such parameter, a request
        target with encoded characters elsewhere than in that value (whose bytes would not say
        what the parser makes of them), a value whose escapes are not one client's way of
        escaping it, or a head too long to keep."""
        if len(raw) > MAX_REPEAT_BYTES:
            return None
        kind = self.kind
        escapes: Escapes = {}
        if name is None:
            span = _length_span(raw, head)
            if span is None:
                start = end = len(raw)
                room = 0
                kind = Same
            else:
                start, end = span
                room = 18
                kind = Sized
        else:
            line = raw[: raw.find(b"\r\n")]
            if b"+" in line:
                return None
            span = _span(line, name.encode())
            if span is None:
                return None
            start, end = span
            if b"%" in line[:start] or b"%" in line[end:]:
                return None
            sent = line[start:end].decode()
            value = head.query.get(name)
            learned = None if value is None else _escapes(sent, value)
            if learned is None:
                return None
            escapes = learned
            room = self.max_line - (len(head.target) - (end - start))
        return self._shared(kind(raw[:start], raw[end:], parsed, room, escapes))

    def respelled(self, repeat: Repeat, raw: bytes, value: str) -> Repeat:
        """`repeat`, or its twin with the escapes `raw` (that head, with `value`) is sent with
        when they are others: a client's first poll, its cursor empty, does not show how it
        escapes the cursors that follow."""
        sent = raw[len(repeat.prefix) : len(raw) - len(repeat.suffix)].decode()
        escapes = _escapes(sent, value)
        if escapes is None or escapes == repeat.escapes:
            return repeat
        return self._shared(
            self.kind(repeat.prefix, repeat.suffix, repeat.parsed, repeat.room, escapes)
        )

    def _shared(self, repeat: Repeat) -> Repeat:
        """The table's repeat of the same bytes and escapes as `repeat`, `repeat` if none."""
        escapes = "".join(sorted(repeat.escapes.values()))
        key = type(repeat).__name__, repeat.prefix, repeat.suffix, escapes
        table = self.table
        found = table.get(key)
        if found is None:
            if len(table) >= MAX_REPEATS:
                table.clear()
            found = table[key] = repeat
        return found


def _escapes(sent: str, value: str) -> Escapes | None:
    """How `sent` escapes `value` (what the parser made of it), when every escape in it stands
    for one ASCII character and that character is sent that way wherever it occurs: then the
    client's next value, escaped the same way, is the bytes it sends."""
    escapes: Escapes = {}
    for escape in ESCAPE.findall(sent):
        code = int(escape[1:], 16)
        if code > 0x7F or escapes.setdefault(code, escape) != escape:
            return None
    return escapes if value.translate(escapes) == sent else None


def _length_span(raw: bytes, head: RequestHead) -> tuple[int, int] | None:
    """Where the value of the head `raw`'s `Content-Length` field lies in it, when the body's
    length is that field's (no transfer coding) and its value plain digits."""
    if head.body_length <= 0 or "content-length" not in head.headers:
        return None
    at = raw.lower().find(LENGTH_FIELD)
    if at < 0:
        return None
    sent = LENGTH_VALUE.match(raw, at + len(LENGTH_FIELD))
    if sent is None or int(sent[1]) != head.body_length:
        return None
    return sent.span(1)


def _span(line: bytes, key: bytes) -> tuple[int, int] | None:
    """Where the value of the query's first parameter `key` lies in the request line `line`,
    split as the head parser splits it (the query starts at the target's first `?`), when
    that value is plain or percent-escaped."""
    target_end = line.rfind(b" ")
    mark = line.find(b"?", 0, target_end)
    if mark < 0:
        return None
    at = mark + 1
    for part in line[at:target_end].split(b"&"):
        if part.partition(b"=")[0] == key:
            if b"=" not in part or not SENT_VALUE.fullmatch(part, len(key) + 1):
                return None
            return at + len(key) + 1, at + len(part)
        at += len(part) + 1
    return None


class Repolls(Bodies):
    """The fast path's part of a connection: the head it remembers (`repeat`), the answered
    poll it keeps (`kept`), and the two ways a request is served from them without a parse."""

    __slots__ = ()

    def remember(self, head: RequestHead, name: str | None, parsed: Again) -> None:
        """Serve the next head that is this one (being served) but for query parameter `name`
        (None: the very same head) with `parsed.again`, without parsing it. Not when
        access-logged and varying: its line needs the target as sent."""
        raw = self.raw
        if raw and (name is None or not self.front.access_log):
            self.repeat = self.front.repeats.find(raw, head, name, parsed)

    def keep(self, kept: Kept) -> None:
        """Leave `kept` for the next request if it repeats the last remembered head (it takes
        it with `take_kept`); any other request, or the connection's end, lets it go."""
        assert self.kept is None  # taken by the request that ends with this call, or let go
        if self.phase == DONE:  # lost before the answered request was done with
            kept.let_go()
        else:
            self.kept = kept

    def take_kept(self) -> Kept | None:
        kept, self.kept = self.kept, None
        return kept

    def _let_go_kept(self) -> None:
        kept = self.kept
        if kept is not None:
            self.kept = None
            kept.let_go()

    def _serve_kept(self, data: bytes) -> bool:
        """Serve `data`, all the connection has of its next request, when it is the remembered
        head with the value the kept object awaits; False when it is not."""
        kept, repeat = self.kept, self.repeat
        if kept is None or repeat is None or self.blocked:
            return False
        value = kept.awaits()
        if not repeat.holds(data, value):
            return False
        self._start(b"", repeat.head, repeat.serve, value)
        return True

    def _serve_repeat(self, raw: bytes, rest: bytes) -> bool:
        """Serve the head `raw` (`rest` follows it) when it repeats the remembered one."""
        repeat = self.repeat
        if repeat is None:
            return False
        value = repeat.value(raw)
        if value is None:
            return False
        if len(raw) - repeat.fixed != len(value):  # sent escaped
            repeat = self.repeat = self.front.repeats.respelled(repeat, raw, value)
        self._start(rest, repeat.head, repeat.serve, value)
        return True
