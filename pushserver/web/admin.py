"""Operator endpoints: channel state, server stats, Prometheus metrics and the health check."""

from __future__ import annotations

import os
import time
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from .. import __version__
from ..core.errors import NotFound, broker_down, draining
from ..core.names import parse_channel
from ..monitor import interpreter
from ..monitor.compiled import compiled
from ..monitor.process import rss_bytes
from .admission import HEAD
from .auth import check_publisher
from .errors import response_for
from .state import STATE, ServerState
from .transports import NAMES


def _json(payload: Any) -> web.Response:
    return web.Response(body=orjson.dumps(payload), content_type="application/json")


async def channel_info(request: web.Request) -> web.Response:
    state = request.app[STATE]
    check_publisher(request, state.settings)
    name = parse_channel(request.match_info["channel"])
    info = await state.hub.info(name)
    if info is None:
        raise NotFound("not_found", f"channel {name!r} does not exist")
    return _json(
        {
            "channel": name,
            "subscribers": state.hub.audience(name),
            "last_id": info.last_id,
            "buffered": info.buffered,
            "epoch": info.epoch,
            "worker": state.worker,
        }
    )


def stats(state: ServerState) -> dict[str, Any]:
    hub = state.hub
    counts = state.admission.connections
    connections = {t: counts.get(t, 0) for t in (*NAMES, HEAD)}
    connections["idle"] = len(state.heads.resting)
    connections["total"] = sum(connections.values())
    return {
        "version": __version__,
        "pid": os.getpid(),
        "worker": state.worker,
        "broker": state.hub.broker.name,
        "broker_healthy": state.hub.broker.healthy,
        "broker_warnings": list(getattr(hub.broker, "warnings", ())),
        "draining": state.draining,
        "uptime": round(time.time() - hub.stats.started, 3),
        "connections": connections,
        "channels": len(hub.broker.history),
        "history_bytes": hub.broker.history.tally.bytes,
        "history_messages": hub.broker.history.tally.messages,
        "messages_in": hub.stats.messages_in,
        "messages_out": sum(hub.stats.delivered.values()),
        "delivered": {t: hub.stats.delivered[t] for t in NAMES},
        "disconnects": dict(hub.stats.disconnects),
        "limits_hit": dict(hub.stats.limits_hit),
        "rss_bytes": rss_bytes(),
        "allocator": state.trimmer.allocator,
        "interpreter": interpreter.describe(),
        "compiled": compiled(),
        "malloc_trims": state.trimmer.trims,
        "malloc_trimmed_bytes": state.trimmer.returned,
        "cpu_seconds": round(time.process_time(), 3),
        "cpu_percent": state.cpu.percent,
        "gc": {
            "pauses": state.gc.pauses,
            "collected": state.gc.collected,
            "pause_seconds_total": round(state.gc.total, 6),
            "pause_seconds_worst": round(state.gc.worst, 6),
        },
        "heartbeat": state.settings.heartbeat,
        "history_size": state.settings.history_size,
        "longpoll_max_messages": state.settings.longpoll_max_messages,
    }


async def stats_handler(request: web.Request) -> web.Response:
    state = request.app[STATE]
    check_publisher(request, state.settings)
    return _json(stats(state))


async def metrics_handler(request: web.Request) -> web.Response:
    state = request.app[STATE]
    check_publisher(request, state.settings)
    response = web.Response(body=state.metrics.render())
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


async def healthz(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if state.draining:
        return response_for(draining())
    if not state.hub.broker.healthy:
        return response_for(broker_down(state.hub.broker.name))
    return web.Response(text="ok")
