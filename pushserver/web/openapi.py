"""`GET /openapi.yaml`: the OpenAPI 3 description of the HTTP API, for tools and fuzzers.

The description is `docs/openapi.yaml` in a source checkout; a wheel carries it inside the
package as `pushserver/openapi.yaml`.
"""

from __future__ import annotations

import functools
from pathlib import Path

from aiohttp import web

from ..core.errors import NotFound

PACKAGE = Path(__file__).resolve().parent.parent
CANDIDATES = (PACKAGE / "openapi.yaml", PACKAGE.parent / "docs" / "openapi.yaml")


@functools.cache
def description() -> bytes | None:
    for path in CANDIDATES:
        if path.is_file():
            return path.read_bytes()
    return None


async def handle(request: web.Request) -> web.Response:
    body = description()
    if body is None:
        raise NotFound("not_found", "this installation carries no OpenAPI description")
    return web.Response(
        body=body, content_type="application/yaml", headers={"Cache-Control": "max-age=300"}
    )
