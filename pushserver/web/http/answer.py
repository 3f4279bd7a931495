"""Answers as bytes: status line and headers as aiohttp would write them, JSON errors, and the
prebuilt long-poll answer the fan-out writes to every plain waiter."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from email.utils import formatdate
from http import HTTPStatus
from typing import Final

from ... import __version__
from ...core.errors import PushError
from ..errors import error_body, refusal_headers, status_of

SERVER: Final = f"pushserver/{__version__}"
NO_CACHE: Final = ("Cache-Control", "no-cache, no-store")
JSON: Final = ("Content-Type", "application/json")
JSON_ONLY: Final = [JSON]
"""The headers of a plain JSON answer, answered from a prebuilt head (`json_whole`) when
nothing is added to it (`Connection.reply` knows it by identity: never modified)."""
CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"


class _Date:
    """The `Date` value of one second, as text (`head`) and as the bytes a prebuilt head takes
    (encoded once a second, not per answer)."""

    __slots__ = ("raw", "second", "text")

    def __init__(self) -> None:
        self.second = -1
        self.text = ""
        self.raw = b""


_DATE: Final = _Date()


def _now() -> _Date:
    now = int(time.time())
    date = _DATE
    if date.second != now:
        date.text = formatdate(now, usegmt=True)
        date.raw = date.text.encode()
        date.second = now
    return date


def http_date() -> str:
    """The `Date` value, formatted once per second."""
    return _now().text


def head(
    status: int,
    headers: Iterable[tuple[str, str]],
    version: str = "1.1",
    keep_alive: bool = True,
    length: int | None = None,
    chunked: bool = False,
) -> bytes:
    """A response head as aiohttp would write it: `Content-Length` when `length` is known,
    chunked transfer on HTTP/1.1 when asked, and `Connection` only where the version's default
    does not already say what happens next."""
    length_text = None if length is None else str(length)
    return _head(status, headers, version, keep_alive, length_text, chunked, http_date()).encode(
        "latin-1"
    )


def _head(
    status: int,
    headers: Iterable[tuple[str, str]],
    version: str,
    keep_alive: bool,
    length: str | None,
    chunked: bool,
    date: str,
) -> str:
    lines = [f"HTTP/{version} {status} {HTTPStatus(status).phrase}"]
    lines.extend(f"{name}: {value}" for name, value in headers)
    if length is not None:
        lines.append(f"Content-Length: {length}")
    elif chunked and version == "1.1":
        lines.append("Transfer-Encoding: chunked")
    lines.append(f"Date: {date}")
    lines.append(f"Server: {SERVER}")
    if keep_alive and version == "1.0":
        lines.append("Connection: keep-alive")
    elif not keep_alive and version == "1.1":
        lines.append("Connection: close")
    lines.append("\r\n")
    return "\r\n".join(lines)


Template = tuple[bytes, bytes, bytes]
"""A head made once for a body of any length: what goes before its length, between its length
and the date, and after the date."""


@functools.cache
def _template(
    status: int, headers: tuple[tuple[str, str], ...], version: str, keep_alive: bool
) -> Template:
    """`head` for a body of any length, encoded once and cut where the length and the date go.
    They follow every given header, so the last NUL is the length's place and the SOH after it
    the date's, whatever a header's value holds."""
    made = _head(status, headers, version, keep_alive, "\x00", False, "\x01").encode("latin-1")
    before, _, rest = made.rpartition(b"\x00")
    between, _, after = rest.partition(b"\x01")
    return before, between, after


def _filled(template: Template, body: bytes) -> bytes:
    """`template` with `body`'s length and this second's date, and `body`, in one allocation
    (a literal format compiles to one build of the parts)."""
    before, between, after = template
    return b"%b%d%b%b%b%b" % (before, len(body), between, _now().raw, after, body)


def whole(
    status: int,
    headers: tuple[tuple[str, str], ...],
    version: str,
    keep_alive: bool,
    body: bytes,
) -> bytes:
    """`head` and `body` together, from a head made once per kind of answer (only the length
    and the date are filled in)."""
    return _filled(_template(status, headers, version, keep_alive), body)


_JSON_HEADS: Final[dict[int, dict[str, dict[bool, Template]]]] = {}
"""`_template(status, (JSON,), version, keep_alive)` by status, version and keep-alive."""


def json_whole(status: int, version: str, keep_alive: bool, body: bytes) -> bytes:
    """`whole(status, (JSON,), version, keep_alive, body)`, its head found by keys whose hashes
    are at hand (an int, a string's cached hash, a bool), not by hashing a tuple of header
    tuples per answer: every publisher's 201 (docs/performance.md, "The publish path trimmed
    again", issue 35's sixth part)."""
    try:
        template = _JSON_HEADS[status][version][keep_alive]
    except KeyError:
        by_version = _JSON_HEADS.setdefault(status, {}).setdefault(version, {})
        template = by_version[keep_alive] = _template(status, (JSON,), version, keep_alive)
    return _filled(template, body)


_PLAIN: Final = _template(200, (NO_CACHE, JSON), "1.1", True)


def json_answer(body: bytes) -> bytes:
    """The whole `200 application/json` HTTP/1.1 keep-alive answer carrying `body` (what
    `whole` gives for it, a lookup sooner: the fan-out builds one per distinct body)."""
    return _filled(_PLAIN, body)


def with_cors(headers: list[tuple[str, str]], cors: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`headers` and the CORS headers `cors`, with one `Vary` line for both (CORS varies with
    `Origin`, a compressed answer with `Accept-Encoding`)."""
    if not cors:
        return headers
    both = headers + cors
    vary = [value for name, value in both if name == "Vary"]
    if len(vary) < 2:
        return both
    return [(name, value) for name, value in both if name != "Vary"] + [("Vary", ", ".join(vary))]


def refusal(exc: PushError) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body of the JSON error for `exc`."""
    headers = [JSON, *refusal_headers(exc).items()]
    return status_of(exc), headers, error_body(exc.code, exc.message)


def closing(
    status: int, headers: Iterable[tuple[str, str]], body: bytes, head_only: bool = False
) -> bytes:
    """An answer to a request never served, announcing that the connection closes; its
    `Content-Length` is the body's even when the body is not sent (`head_only`: a HEAD's)."""
    sent = head(status, headers, "1.1", False, len(body))
    return sent if head_only else sent + body
