"""The JSON error every client can act on: `{"error": code, "message": text}` with a status.

The core raises plain `PushError`s; this module is where each kind gets its HTTP status.
"""

from __future__ import annotations

import orjson
from aiohttp import web

from ..core.errors import (
    Forbidden,
    InvalidInput,
    NotFound,
    OutcomeUnknown,
    PushError,
    TooLarge,
    TooMany,
    Unauthorized,
    Unavailable,
)


class UnsupportedEncoding(InvalidInput):
    """A request body in a content coding the server does not read (RFC 9110 section 15.5.16);
    its answer names the codings it does read (`Accept-Encoding`)."""


ACCEPT_ENCODING = "gzip, deflate"
"""The content codings request bodies may come in (`http.body.CODINGS`)."""

STATUS: dict[type[PushError], int] = {
    UnsupportedEncoding: 415,
    InvalidInput: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    TooLarge: 413,
    TooMany: 429,
    Unavailable: 503,
    OutcomeUnknown: 504,
}
BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="pushserver"'}


def status_of(exc: PushError) -> int:
    for kind in type(exc).__mro__:
        status = STATUS.get(kind)
        if status is not None:
            return status
    return 400


def error_body(code: str, message: str) -> bytes:
    return orjson.dumps({"error": code, "message": message})


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    body = error_body(code, message)
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def refusal_headers(exc: PushError) -> dict[str, str]:
    """Retry-After or a challenge, when they apply to a refusal."""
    headers: dict[str, str] = {}
    if exc.retry_after is not None:
        headers["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, Unauthorized):
        headers.update(BEARER_CHALLENGE)
    if isinstance(exc, UnsupportedEncoding):
        headers["Accept-Encoding"] = ACCEPT_ENCODING
    return headers


def response_for(exc: PushError) -> web.Response:
    """The response a refusal gets: its status, and Retry-After or a challenge when they apply."""
    return error_response(status_of(exc), exc.code, exc.message, refusal_headers(exc))
