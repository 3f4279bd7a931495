"""Python client for pushserver: subscribe over SSE, NDJSON stream, long-poll or WebSocket
without losing a message across dropped connections, and publish."""

from .backoff import Backoff
from .client import PushClient
from .errors import (
    BadRequest,
    ConnectionLost,
    Forbidden,
    InvalidChannel,
    InvalidURL,
    NetworkError,
    NotFound,
    OutcomeUnknown,
    PayloadTooLarge,
    PushError,
    RetriesExhausted,
    ServerError,
    ServiceUnavailable,
    TokenExpired,
    TooManyRequests,
    Unauthorized,
)
from .models import Gap, Message, PublishResult
from .subscription import Subscription
from .transports import TRANSPORT_NAMES

__all__ = [
    "TRANSPORT_NAMES",
    "Backoff",
    "BadRequest",
    "ConnectionLost",
    "Forbidden",
    "Gap",
    "InvalidChannel",
    "InvalidURL",
    "Message",
    "NetworkError",
    "NotFound",
    "OutcomeUnknown",
    "PayloadTooLarge",
    "PublishResult",
    "PushClient",
    "PushError",
    "RetriesExhausted",
    "ServerError",
    "ServiceUnavailable",
    "Subscription",
    "TokenExpired",
    "TooManyRequests",
    "Unauthorized",
]
