"""The aiohttp application: routes, the JSON error middleware and the background timers."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from ..broker import create_broker
from ..config import Settings
from ..core.errors import PushError
from ..core.expiry import ExpiryWatch
from ..core.hub import Hub
from ..core.ratelimit import RateLimiter
from ..monitor.gcmonitor import GcMonitor
from ..monitor.metrics import Metrics
from ..monitor.trim import Trimmer
from . import admin, cors, extension, limits, openapi, proxies
from .admission import Admission
from .errors import error_response, response_for
from .front.forward import Conduit
from .state import STATE, ServerState
from .transports import NAMES
from .transports.common import forget_cursors

log = logging.getLogger("pushserver")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

HTTP_ERROR_CODES = {
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    414: "too_large",
    431: "too_large",
}


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error a client sees is `{"error", "message"}`; bad input is never a 500.

    The outermost middleware that answers: it sends the whole response itself (aiohttp then
    sends nothing more) and tells the front end's conduit that the answer is out, so the
    front end can read the connection's next request (`front/forward.py`).
    """
    response = await _answer(request, handler)
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionError:
        return response  # the client left: aiohttp's own finishing notes that quietly
    conduit = request.transport
    if isinstance(conduit, Conduit):
        conduit.sent(bool(response.keep_alive))
    return response


async def _answer(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except PushError as exc:
        limits.count(request.app[STATE], exc)
        return response_for(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            return exc
        code = HTTP_ERROR_CODES.get(exc.status, "bad_request" if exc.status < 500 else "error")
        headers = {k: v for k, v in exc.headers.items() if k in ("Allow", "Retry-After")}
        return error_response(exc.status, code, exc.reason or code, headers)
    except (asyncio.CancelledError, ConnectionError):
        raise
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal", "internal server error")


def forwarded_client(trusted: tuple[proxies.Network, ...]) -> Middleware:
    """Requests through a trusted proxy carry the client's address as `request.remote`, so the
    loopback publish rule and the per-address limits apply to the client, not to the proxy."""

    @web.middleware
    async def attribute(request: web.Request, handler: Handler) -> web.StreamResponse:
        forwarded = request.headers.getall("X-Forwarded-For", ())
        client = proxies.client_address(request.remote, forwarded, trusted)
        if client is not None and client != request.remote:
            request = request.clone(remote=client)
        return await handler(request)

    return attribute


def add_routes(app: web.Application) -> None:
    """The operator routes; subscribing and publishing are the front end's (`transports.ROUTES`,
    `front.routes.ROUTES`)."""
    app.router.add_get("/channels/{channel}", admin.channel_info)
    app.router.add_get("/stats", admin.stats_handler)
    app.router.add_get("/metrics", admin.metrics_handler)
    app.router.add_get("/healthz", admin.healthz)
    app.router.add_get("/openapi.yaml", openapi.handle)


async def _every(seconds: float, action: Callable[[], object]) -> None:
    """Run `action` (plain or async) every `seconds`; a failure is logged, not fatal."""
    while True:
        await asyncio.sleep(seconds)
        try:
            done = action()
            if inspect.isawaitable(done):
                await done
        except Exception:
            log.exception("periodic %s failed", getattr(action, "__name__", action))


def _hand_back(state: ServerState) -> None:
    """Memory the channels swept since the last call held, given back: the names cached
    requests keep first (`forget_cursors`), what a flood left once it is over (a full
    collection, `GcMonitor.drained`), then the C allocator's free pages (`Trimmer`)."""
    forget_cursors()
    hub = state.hub
    state.gc.drained(len(hub.channels) + len(hub.broker.history))
    state.trimmer.check()


async def _timers(app: web.Application) -> AsyncIterator[None]:
    state = app[STATE]
    settings = state.settings
    hub = state.hub
    async with hub.broker.running(hub):
        idle_after = max(settings.history_ttl, 2 * settings.sweep_interval)
        tasks = [
            asyncio.create_task(_every(settings.heartbeat, hub.fanout.heartbeat)),
            asyncio.create_task(_every(settings.sweep_interval, lambda: hub.sweep(idle_after))),
            asyncio.create_task(_every(1.0, state.cpu.sample)),
            asyncio.create_task(_every(settings.sweep_interval, lambda: _hand_back(state))),
        ]
        yield
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    state.gc.uninstall()


async def create_app(
    settings: Settings, worker: int = 0, hub_type: type[Hub] = Hub
) -> web.Application:
    """Build the app inside a running loop (the hub schedules its flushes on it). `hub_type`
    is the hub's class: a subclass can observe what the web layer asks of it, compiled too."""
    hub = hub_type(
        create_broker(settings),
        max_buffer_bytes=settings.max_buffer_bytes,
        max_flush_delay=settings.max_flush_delay,
    )
    gc = GcMonitor(lambda generation, seconds: metrics.observe_gc(generation, seconds))
    admission = Admission(settings, hub.stats.limits_hit)
    trimmer = Trimmer()
    metrics = Metrics(
        hub,
        (NAMES, admission.connections),
        worker,
        lambda: {
            "gc_pauses": gc.pauses,
            "gc_pause_worst_seconds": gc.worst,
            "gc_collected_objects": gc.collected,
            "malloc_trims": trimmer.trims,
            "malloc_trimmed_bytes": trimmer.returned,
        },
    )
    gc.install(settings.gc_thresholds)
    middlewares: list[Middleware] = [json_errors]
    if settings.trusted_networks:
        middlewares.insert(0, forwarded_client(settings.trusted_networks))
    app = web.Application(middlewares=middlewares, client_max_size=settings.max_message_bytes)
    app[STATE] = state = ServerState(
        settings, hub, metrics, gc, ExpiryWatch(hub), worker, admission, trimmer=trimmer
    )
    if settings.max_publish_rate > 0:
        state.limiter = RateLimiter(settings.max_publish_rate)
    cors.setup(app, settings.cors_origins)
    add_routes(app)
    if settings.extension:
        await extension.extend(app, settings.extension)
    app.cleanup_ctx.append(_timers)
    return app
