"""CORS for browser clients on other origins (`--cors-origin`).

Headers are added when a response is prepared, so held streams and WebSocket handshakes carry
them as well as ordinary answers and errors. Credentials are allowed only for origins listed by
name, never through `*`. Without the setting the server sends no CORS headers at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from aiohttp import hdrs, web

ALLOW_METHODS = "GET, POST, OPTIONS"
ALLOW_HEADERS = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID"
EXPOSE_HEADERS = "Retry-After, WWW-Authenticate"
MAX_AGE = "600"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Cors:
    def __init__(self, origins: Sequence[str]) -> None:
        self.any = "*" in origins
        self.listed = frozenset(o for o in origins if o != "*")

    def headers(self, origin: str | None) -> dict[str, str]:
        """The CORS headers for a request from `origin`; empty when it is not allowed."""
        if not origin:
            return {}
        if origin in self.listed:
            return {
                "Access-Control-Allow-Origin": origin,
                "Access-Control-Allow-Credentials": "true",
                "Access-Control-Expose-Headers": EXPOSE_HEADERS,
                "Vary": "Origin",
            }
        if self.any:
            headers = {
                "Access-Control-Allow-Origin": "*",
                "Access-Control-Expose-Headers": EXPOSE_HEADERS,
            }
            if self.listed:  # the answer differs for listed origins: caches must keep both
                headers["Vary"] = "Origin"
            return headers
        return {}

    async def on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        for name, value in self.headers(request.headers.get(hdrs.ORIGIN)).items():
            if name == "Vary" and hdrs.VARY in response.headers:
                value = f"{response.headers[hdrs.VARY]}, {value}"
            response.headers[name] = value

    @web.middleware
    async def preflight(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Answer `OPTIONS` preflights on every route; other requests go on."""
        if (
            request.method != hdrs.METH_OPTIONS
            or hdrs.ACCESS_CONTROL_REQUEST_METHOD not in request.headers
            or _unrouted(request)
        ):
            return await handler(request)
        response = web.Response(status=204)
        if self.headers(request.headers.get(hdrs.ORIGIN)):
            response.headers["Access-Control-Allow-Methods"] = ALLOW_METHODS
            response.headers["Access-Control-Allow-Headers"] = ALLOW_HEADERS
            response.headers["Access-Control-Max-Age"] = MAX_AGE
        return response


def _unrouted(request: web.Request) -> bool:
    exc = request.match_info.http_exception
    return exc is not None and exc.status == 404


def setup(app: web.Application, origins: Sequence[str]) -> None:
    """Install CORS when origins are configured; otherwise leave the app untouched."""
    if not origins:
        return
    cors = Cors(origins)
    app.middlewares.append(cors.preflight)
    app.on_response_prepare.append(cors.on_prepare)
