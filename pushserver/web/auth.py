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
    key = settings.publish_key
    if not key:
        if not is_loopback(request.remote):
            raise Forbidden(
                "forbidden", "publishing without --publish-key is allowed from loopback only"
            )
        return
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    # aiohttp keeps a header's undecodable bytes as surrogates: encode them back, never fail.
    given_bytes = given.strip().encode("utf-8", "surrogateescape")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given_bytes, key.encode()):
        raise Unauthorized(
            "unauthorized", "missing or wrong publish key (send Authorization: Bearer <key>)"
        )
