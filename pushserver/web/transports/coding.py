"""How a long-poll answer is coded: JSON or JSONP source, gzip or as it is, as its request
accepts it. Apart from `longpoll.py` so that the poll's life there reads without the codings."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ...wire.compression import GZIP_MIN_BYTES, gzip_body
from ..http import answer
from ..http.answer import JSON, NO_CACHE
from ..http.coding import GZIP, VARY, Accepts, accepts
from ..http.request import RequestHead

if TYPE_CHECKING:
    from ...config import Settings


def script_safe(body: bytes) -> bytes:
    """JSON as JavaScript source: U+2028 and U+2029 end a line in the string literals of
    scripts before ES2019, the old browsers JSONP serves, so they go as escapes."""
    return body.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")


def accepted(settings: Settings, head: RequestHead) -> Accepts | None:
    """What codings `head`'s answer may come in; None when the server compresses nothing."""
    if not settings.compress:
        return None
    return accepts(head.headers.get("accept-encoding"))


@functools.lru_cache(maxsize=32)
def gzip_once(body: bytes) -> bytes:
    """`gzip_body`, once for the polls answered with the same body (the same backlog)."""
    return gzip_body(body)


def encoded(
    headers: list[tuple[str, str]], body: bytes, accepted: Accepts | None
) -> tuple[list[tuple[str, str]], bytes]:
    """An answer as its request accepts it: gzip from `GZIP_MIN_BYTES` (of any size when the
    request refuses it as it is), with `Vary` whenever it accepts gzip."""
    if accepted is None or not accepted.gzip:
        return headers, body
    if len(body) < GZIP_MIN_BYTES and accepted.identity:
        return [*headers, VARY], body
    return [*headers, GZIP, VARY], gzip_once(body)


VARIED = (NO_CACHE, JSON, VARY)
GZIPPED = (NO_CACHE, JSON, GZIP, VARY)


def gzip_json_answer(body: bytes) -> bytes:
    """`json_answer` for a request that accepts gzip: the body gzipped from `GZIP_MIN_BYTES`."""
    if len(body) < GZIP_MIN_BYTES:
        return answer.whole(200, VARIED, "1.1", True, body)
    return answer.whole(200, GZIPPED, "1.1", True, gzip_once(body))
