"""Serving in one process: event loop, open-file limit, socket, signals, graceful drain."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import resource
import signal
import socket
from collections.abc import Callable

from aiohttp import web

from ..config import FILES_RESERVED, ConfigError, Settings
from ..monitor import interpreter
from ..monitor.allocator import missing, wanted
from ..monitor.compiled import build
from ..monitor.gcmonitor import GcMonitor
from . import logfilter
from .app import create_app
from .front.protocol import Front, FrontProtocol
from .state import STATE, ServerState
from .transports import REGISTRY

log = logging.getLogger("pushserver")


def raise_open_file_limit(settings: Settings) -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one; warn when it cannot hold the connections.

    `--max-connections` applies per process, and its default already fits; an explicit value
    that does not is warned about.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    if soft != resource.RLIM_INFINITY:
        usable = max(0, soft - FILES_RESERVED)
        if settings.max_connections > usable:
            log.warning(
                "--max-connections %d exceeds what the open-file limit allows: %d files per "
                "process (hard limit %s) hold about %d connections; raise the limit (ulimit -n, "
                "LimitNOFILE=) or add workers or machines for more",
                settings.max_connections,
                soft,
                hard,
                usable,
            )
    return soft


def url_for(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def listening_socket(settings: Settings) -> socket.socket:
    """Bound before the app starts, with SO_REUSEPORT so several workers can share the port.

    An address that cannot be bound is the operator's to fix: ConfigError naming the flags.
    """
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if settings.workers > 1:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on --host {settings.host} --port {settings.port}: {exc.strerror}"
        ) from None
    sock.setblocking(False)
    return sock


@dataclasses.dataclass(eq=False)
class Serving:
    """A server accepting connections: the front end, and aiohttp for what it passes on."""

    state: ServerState
    runner: web.AppRunner
    listener: asyncio.Server
    front: Front

    async def drain(self) -> None:
        """Stop accepting, end what is held, close what is idle, and wait for the rest.

        The publishes and subscribes the broker holds are answered before `runner.cleanup`, whose
        app cleanup closes the broker: a publish gets the broker's answer rather than
        `504 outcome_unknown`, a subscribe `503 draining` rather than nothing."""
        shutdown = self.state.hub.shutdown
        self.listener.close()
        shutdown.drain()
        self.front.close_idle()
        await shutdown.answered()
        await self.runner.cleanup()
        await shutdown.all_gone()


async def start_serving(app: web.Application, sock: socket.socket) -> Serving:
    """Accept on `sock` with the front end; aiohttp's protocol (`runner.server`, its public
    protocol factory) is made per connection for the requests the front end passes on."""
    state = app[STATE]
    settings = state.settings
    runner = web.AppRunner(
        app,
        handler_cancellation=True,
        access_log=logging.getLogger("aiohttp.access") if settings.access_log else None,
        max_line_size=settings.max_line_size,
        max_field_size=settings.max_field_size,
        max_headers=settings.max_headers,
        shutdown_timeout=settings.shutdown_timeout,
        keepalive_timeout=settings.request_timeout,
    )
    await runner.setup()
    assert runner.server is not None
    front = Front(state, runner.server, REGISTRY)
    listener = await asyncio.get_running_loop().create_server(
        lambda: FrontProtocol(front), sock=sock, backlog=4096
    )
    return Serving(state, runner, listener, front)


async def serve(
    settings: Settings,
    sock: socket.socket,
    worker: int = 0,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT, then drain within the shutdown timeout.

    `on_ready(url)` replaces the ready line, for a supervisor that prints it once for all workers.
    """
    logfilter.install()
    app = await create_app(settings, worker)
    serving = await start_serving(app, sock)
    host, port = sock.getsockname()[:2]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    state = serving.state
    allocator = state.trimmer.allocator
    log.info(
        "worker %d listening on %s (%s broker, %s loop, allocator %s + %s, %s) on %s",
        worker,
        url_for(host, port),
        state.hub.broker.name,
        settings.loop,
        allocator["python"],
        allocator["c"],
        build(),
        interpreter.summary(interpreter.describe()),
    )
    wants = wanted(settings.allocator, bool(settings.redis))
    warning = missing(wants, allocator["c"]) if worker == 0 else ""
    if warning:
        log.warning(warning)
    if on_ready is not None:
        on_ready(url_for(host, port))
    elif worker == 0:
        print(f"pushserver listening on {url_for(host, port)}", flush=True)
    GcMonitor.freeze()
    await stop.wait()
    log.info(
        "draining: %d held connections, %d publishes and subscribes awaiting the broker",
        state.admission.total,
        state.hub.shutdown.awaiting,
    )
    state.draining = True
    try:
        await asyncio.wait_for(serving.drain(), settings.shutdown_timeout)
    except TimeoutError:
        log.warning("shutdown timeout (%ss) passed; closing the rest", settings.shutdown_timeout)
    log.info("stopped")


def run_worker(
    settings: Settings,
    sock: socket.socket,
    worker: int = 0,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve on `sock` in this process, on the event loop the settings ask for."""
    if settings.loop == "uvloop":
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    else:
        runner = asyncio.Runner()
    with runner:
        runner.run(serve(settings, sock, worker, on_ready))
