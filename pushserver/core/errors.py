"""Why the server refuses something, as plain exceptions: the core raises them, the web layer
turns each kind into its HTTP status (`pushserver.web.errors`).

`code` is the machine-readable reason clients act on (`bad_cursor`, `broker_down`, ...), and
`message` the sentence a person reads.
"""

from __future__ import annotations


class PushError(Exception):
    """A refusal; subclasses say which kind, so callers never deal in status codes."""

    def __init__(self, code: str, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after
        """Seconds after which trying again makes sense, when that is known."""


class InvalidInput(PushError):
    """Something the client sent is malformed or out of range; it must change it."""


class Unauthorized(PushError):
    """A credential (publish key, subscribe token) is missing, wrong or expired."""


class Forbidden(PushError):
    """The credential is valid but does not cover what was asked."""


class NotFound(PushError):
    """The thing asked about does not exist."""


class TooLarge(PushError):
    """A body or item passes a size limit."""


class TooMany(PushError):
    """The client is over a per-client limit (connections per address, publish rate)."""


class Unavailable(PushError):
    """The server cannot serve this now (over capacity, draining, broker down); retry later."""

    def __init__(self, code: str, message: str, retry_after: int = 1) -> None:
        super().__init__(code, message, retry_after)


class OutcomeUnknown(Unavailable):
    """The broker may or may not have done what was asked (it timed out after the request was
    sent): a retry is safe only with the same idempotency key."""


def outcome_unknown(name: str, retry_after: int = 2) -> OutcomeUnknown:
    return OutcomeUnknown(
        "outcome_unknown",
        f"the {name} broker did not answer: the message may have been published; retry with "
        "the same Idempotency-Key",
        retry_after,
    )


def broker_down(name: str, retry_after: int = 2) -> Unavailable:
    """The one answer for a broker that cannot be reached."""
    return Unavailable("broker_down", f"{name} broker is unavailable", retry_after)


def draining() -> Unavailable:
    """The one answer while the server shuts down."""
    return Unavailable("draining", "server is shutting down; reconnect elsewhere", 1)
