"""Typed errors: one base, one class per thing a caller may want to catch."""

from __future__ import annotations

from collections.abc import Mapping

import orjson


class PushError(Exception):
    """Base of every pushclient error; HTTP errors carry the server's status, code and message."""

    default_code = "error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code or self.default_code
        self.retry_after = retry_after

    def __str__(self) -> str:
        prefix = f"{self.status} " if self.status is not None else ""
        return f"{prefix}{self.code}: {self.message}"


class InvalidURL(PushError, ValueError):
    default_code = "bad_url"


class InvalidChannel(PushError, ValueError):
    default_code = "bad_channel"


class NetworkError(PushError):
    """The server could not be reached, or the connection broke during a request."""

    default_code = "network_error"


class BadRequest(PushError):
    default_code = "bad_request"


class Unauthorized(PushError):
    default_code = "unauthorized"


class Forbidden(PushError):
    default_code = "forbidden"


class NotFound(PushError):
    default_code = "not_found"


class PayloadTooLarge(PushError):
    default_code = "too_large"


class RequestTimeout(PushError):
    """408 (a proxy gave up waiting for the request): retried by subscriptions."""

    default_code = "request_timeout"


class TooManyRequests(PushError):
    """429: retried by subscriptions (after `retry_after` when given)."""

    default_code = "too_many_connections"


class ServerError(PushError):
    """5xx: retried by subscriptions."""

    default_code = "server_error"


class ServiceUnavailable(ServerError):
    """503 (over capacity, draining, broker down): retry after `retry_after` seconds."""

    default_code = "unavailable"


class OutcomeUnknown(ServerError):
    """504 outcome_unknown: the message may have been published; `publish` retries it with the
    same idempotency key, which is safe."""

    default_code = "outcome_unknown"


class ConnectionLost(PushError):
    """A subscription stopped for good; resume later from `cursor`."""

    default_code = "connection_lost"

    def __init__(self, message: str, *, cursor: str | None) -> None:
        super().__init__(message)
        self.cursor = cursor


class RetriesExhausted(ConnectionLost):
    """The subscription failed `attempts` times in a row (its `max_retries` was reached)."""

    default_code = "retries_exhausted"

    def __init__(self, attempts: int, last_error: BaseException, *, cursor: str | None) -> None:
        super().__init__(f"gave up after {attempts} attempts: {last_error}", cursor=cursor)
        self.attempts = attempts
        self.last_error = last_error


class TokenExpired(ConnectionLost):
    """The subscription token expired; subscribe again with a new token from `cursor`."""

    default_code = "expired"


_BY_STATUS: dict[int, type[PushError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    408: RequestTimeout,
    413: PayloadTooLarge,
    429: TooManyRequests,
    503: ServiceUnavailable,
    504: OutcomeUnknown,
}


def error_from_response(status: int, body: bytes, headers: Mapping[str, str]) -> PushError:
    """Turn a non-2xx answer into its typed error, keeping the server's code and message; an
    answer that is not the protocol's JSON (a proxy's page) gets the code `http_<status>`."""
    try:
        parsed = orjson.loads(body)
        code, message = str(parsed["error"]), str(parsed.get("message", ""))
    except (orjson.JSONDecodeError, TypeError, KeyError, AttributeError):
        code = f"http_{status}"
        message = body.decode("utf-8", "replace").strip()[:200] or f"HTTP {status}"
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else PushError)
    return cls(message, status=status, code=code, retry_after=parse_retry_after(headers))


def is_retryable(error: PushError) -> bool:
    """Whether another attempt can succeed (protocol.md, "Errors"): network errors, 408, 429
    and 5xx are retried; any other 4xx is final."""
    return isinstance(error, NetworkError | RequestTimeout | TooManyRequests | ServerError)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Retry-After as protocol.md reads it: ASCII digits are seconds; anything else (an HTTP
    date, a sign, decimals) is ignored, as every client in this repository does."""
    value = headers.get("Retry-After", "").strip(" \t")
    return float(value) if value.isascii() and value.isdigit() else None
