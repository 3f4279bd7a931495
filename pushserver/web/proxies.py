"""Which client a request comes from when reverse proxies stand in between.

Each proxy appends the address it received the request from to `X-Forwarded-For`, so the list
reads client, proxy 1, proxy 2 …, and the connection itself comes from the last proxy. Only what
trusted proxies appended can be believed: anyone can send the header with any addresses in it.
The client is therefore the rightmost address that is not a trusted proxy. Without trusted
proxies the header is ignored, and a request from an untrusted peer is that peer's.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.lru_cache(maxsize=4096)
def is_trusted(address: str, trusted: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    return any(ip in network for network in trusted)


def client_address(
    peer: str | None, forwarded_for: Iterable[str], trusted: tuple[Network, ...]
) -> str | None:
    """The client's address: `peer`, or when `peer` is a trusted proxy, the rightmost entry of
    the `X-Forwarded-For` headers (`forwarded_for`, in order) that is not one."""
    if peer is None or not is_trusted(peer, trusted):
        return peer
    hops = [hop.strip() for header in forwarded_for for hop in header.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not is_trusted(hop, trusted):
            return hop
    return hops[0] if hops else peer
