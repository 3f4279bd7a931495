"""The JSON error every client can act on: `{"error": code, "message": text}` with a status."""

from __future__ import annotations

import orjson
from aiohttp import web


class ApiError(Exception):
    """Raised anywhere in request handling; the error middleware turns it into a response."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}

    def response(self) -> web.Response:
        return error_response(self.status, self.code, self.message, self.headers)


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    body = orjson.dumps({"error": code, "message": message})
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def bad_request(code: str, message: str) -> ApiError:
    return ApiError(400, code, message)


def unavailable(code: str, message: str, retry_after: int = 1) -> ApiError:
    return ApiError(503, code, message, {"Retry-After": str(retry_after)})
