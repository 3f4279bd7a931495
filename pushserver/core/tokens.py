"""Subscriber tokens: HS256 JWTs naming the channels a subscriber may read, and until when.

An app server that knows its users mints a short-lived token per user; the push server needs no
user database, only the shared secret. A token's `channels` claim lists names, a trailing `*`
allowing every channel with that prefix (`user.42.*`).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable, Sequence

import jwt

from .errors import Forbidden, Unauthorized

ALGORITHM = "HS256"
MIN_SECRET_BYTES = 32
"""RFC 7518 3.2: an HS256 key at least as long as the hash. Shorter ones are warned about once, at
start, in the server's words; PyJWT's own warning on every encode and decode is silenced."""

warnings.filterwarnings("ignore", category=jwt.InsecureKeyLengthWarning)


def weak_secret(secret: str, name: str) -> str | None:
    """What to tell the operator about a secret too short to resist guessing, if anything."""
    size = len(secret.encode())
    if not secret or size >= MIN_SECRET_BYTES:
        return None
    return (
        f"{name} is {size} bytes, shorter than {MIN_SECRET_BYTES}: a short secret can be guessed "
        f"and then anyone can mint subscribe tokens; use {MIN_SECRET_BYTES} random bytes or more "
        "(openssl rand -hex 32)"
    )


def _unauthorized(message: str) -> Unauthorized:
    return Unauthorized("unauthorized", message)


def allows(patterns: Iterable[str], channel: str) -> bool:
    """Whether a `channels` claim covers `channel`: an exact name or a `prefix*`."""
    for pattern in patterns:
        if pattern.endswith("*"):
            if channel.startswith(pattern[:-1]):
                return True
        elif pattern == channel:
            return True
    return False


def verify(token: str | None, secret: str, channels: Sequence[str], audience: str = "") -> float:
    """Check a subscribe token against the channels asked for; returns its expiry (epoch s).

    With `audience` set, the token's `aud` must name it; without, a token with `aud` is meant
    for some other service and is refused.
    Missing, malformed, badly signed or expired: 401. Valid but not covering a channel: 403.
    """
    if not token:
        raise _unauthorized("this server needs a subscribe token (?token=JWT)")
    required = ["exp", "channels", "aud"] if audience else ["exp", "channels"]
    try:
        claims = jwt.decode(
            token,
            secret,
            algorithms=[ALGORITHM],
            audience=audience or None,
            options={"require": required},
        )
    except jwt.ExpiredSignatureError:
        raise _unauthorized("subscribe token expired") from None
    except jwt.InvalidAudienceError:
        wanted = f"must name {audience!r}" if audience else "is set but --token-audience is not"
        raise _unauthorized(f"invalid subscribe token: its aud claim {wanted}") from None
    except jwt.InvalidTokenError as exc:
        raise _unauthorized(f"invalid subscribe token: {exc}") from None
    patterns = claims["channels"]
    exp = claims["exp"]
    if (
        not isinstance(patterns, list)
        or not all(isinstance(p, str) for p in patterns)
        or isinstance(exp, bool)
        or not isinstance(exp, int | float)
    ):
        raise _unauthorized("invalid subscribe token: claims channels (list) and exp (number)")
    for channel in channels:
        if not allows(patterns, channel):
            raise Forbidden("forbidden", f"subscribe token does not allow channel {channel!r}")
    return float(exp)


def mint(channels: Sequence[str], ttl: float, secret: str, now: float | None = None) -> str:
    """A token for `channels` valid at least `ttl` seconds, for app servers' examples and tests.

    `exp` is whole seconds: rounding it down would cut up to a second off a short token's life.
    """
    issued = time.time() if now is None else now
    claims = {"channels": list(channels), "exp": math.ceil(issued + ttl), "iat": int(issued)}
    return jwt.encode(claims, secret, algorithm=ALGORITHM)
