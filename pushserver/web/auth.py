"""Who may publish: a bearer key compared in constant time, or loopback callers if no key."""

from __future__ import annotations

import functools
import hmac
import ipaddress

from aiohttp import web

from ..config import Settings
from ..core.errors import Forbidden, Unauthorized


@functools.lru_cache(maxsize=4096)
def is_loopback(remote: str | None) -> bool:
    if not remote:
        return False
    try:
        return ipaddress.ip_address(remote.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def check_publisher(request: web.Request, settings: Settings) -> None:
    """Publishing and admin: the key when one is configured, else loopback only."""
    authorize(request.remote, request.headers.get("Authorization"), settings)


def authorize(remote: str | None, authorization: str | None, settings: Settings) -> None:
    """`check_publisher` from the client's address and its `Authorization` value (decoded as
    aiohttp decodes headers: UTF-8, undecodable bytes kept as surrogates)."""
    key = settings.publish_key
    if not key:
        if not is_loopback(remote):
            raise Forbidden(
                "forbidden", "publishing without --publish-key is allowed from loopback only"
            )
        return
    scheme, _, given = (authorization or "").partition(" ")
    # Encode the surrogates back to the bytes sent, never fail.
    given_bytes = given.strip().encode("utf-8", "surrogateescape")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given_bytes, key.encode()):
        raise Unauthorized(
            "unauthorized", "missing or wrong publish key (send Authorization: Bearer <key>)"
        )
