"""Whether a request accepts a gzip answer (`Accept-Encoding`, RFC 9110 section 12.5.3).

Only what the server can send matters: gzip, or the answer as it is (identity). A coding is
acceptable when it is named (`x-gzip` is gzip's alias) with a non-zero `q`, or, not named, when
`*` is, with a non-zero `q`; identity is acceptable unless refused (`identity;q=0`, or `*;q=0`
without `identity`). A malformed `q` refuses its coding: a client that cannot say what it wants
gets the answer as it is. The headers clients send repeat, so the parse is cached.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

QVALUE = re.compile(r"0(\.[0-9]{0,3})?|1(\.0{0,3})?")
VARY = ("Vary", "Accept-Encoding")
GZIP = ("Content-Encoding", "gzip")


class Accepts(NamedTuple):
    gzip: bool
    identity: bool


IDENTITY_ONLY = Accepts(False, True)


@functools.lru_cache(maxsize=256)
def accepts(value: str | None) -> Accepts:
    """What the `Accept-Encoding` value `value` (None: no such header) accepts."""
    if not value:
        return IDENTITY_ONLY
    weights: dict[str, float] = {}
    for item in value.split(","):
        name, _, params = item.partition(";")
        name = name.strip().lower()
        if name:
            weights[name] = _weight(params)
    star = weights.get("*")
    gzip = weights.get("gzip", weights.get("x-gzip", star))
    identity = weights.get("identity", star)
    return Accepts(bool(gzip), identity is None or identity > 0)


def _weight(params: str) -> float:
    """The `q` among a coding's parameters (1 when none)."""
    for param in params.split(";"):
        key, _, raw = param.partition("=")
        if key.strip().lower() == "q":
            raw = raw.strip()
            return float(raw) if QVALUE.fullmatch(raw) else 0.0
    return 1.0
