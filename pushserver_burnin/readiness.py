"""Read a held connection from the gevent hub's own loop instead of a greenlet per socket.

A greenlet blocked in recv() costs, per message, a timer armed and cancelled, two switches and
a second recv() that finds nothing: most of a delivery's client CPU. Here the hub calls
`on_data` with whatever one recv() returned as soon as the socket is readable, so thousands
of subscribers share the hub's one selector and a burst of frames is parsed in one go. The
subscriber's greenlet only sleeps until the connection fails or stays silent too long.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from socket import socket

import gevent
from gevent.event import AsyncResult

from pushserver_measure import timestamps
from pushserver_measure.http11 import ConnectionClosed

_RECV_SIZE = 65536
_READ = 1  # libev/libuv readiness flag for "readable"


def serve(
    sock: socket,
    on_data: Callable[[bytes, float], None],
    idle_timeout: float,
    stamped: bool = False,
    failed: AsyncResult | None = None,
) -> None:
    """Feed the socket's bytes to `on_data` with when they came (epoch seconds) until it fails;
    raise what failed.

    When they came is when they were read, or, `stamped` (the socket asks for timestamps,
    `pushserver_measure.timestamps`), when the kernel received the last of them: a read late
    because this process waited for a core is then timed as it arrived. `on_data` runs inside
    the hub, so it must never block; whatever it raises ends the connection and is raised here.
    Silence longer than `idle_timeout` (heartbeats missed) raises ConnectionClosed. An exception
    set on `failed` from outside ends the connection the same way (a drop on purpose).
    """
    if failed is None:
        failed = AsyncResult()
    last_read = time.monotonic()
    fd = sock.fileno()

    def readable() -> None:
        nonlocal last_read
        try:
            if stamped:
                data, ancillary, _, _ = sock.recvmsg(_RECV_SIZE, timestamps.ANCILLARY)
                came = timestamps.stamp(ancillary)
            else:  # the descriptor is non-blocking: no gevent wrapper
                data, came = os.read(fd, _RECV_SIZE), None
            if not data:
                raise ConnectionClosed("connection closed by the server")
            last_read = time.monotonic()
            on_data(data, time.time() if came is None else came)
        except BlockingIOError:
            return
        except BaseException as exc:  # handed to the subscriber's greenlet, never lost
            watcher.stop()
            failed.set_exception(exc)

    sock.setblocking(False)
    watcher = gevent.get_hub().loop.io(fd, _READ)
    watcher.start(readable)
    try:
        while not failed.ready():
            failed.wait(idle_timeout)
            if not failed.ready() and time.monotonic() - last_read > idle_timeout:
                raise ConnectionClosed(f"nothing received for {idle_timeout:g} s")
        failed.get()  # raises what ended the connection
    finally:
        watcher.stop()
        watcher.close()


def send_small(sock: socket, data: bytes) -> None:
    """Send a few hundred bytes (a poll, a pong) from inside the hub, where nothing may block.

    The connection's send buffer is empty between polls and pongs, so they always fit; if one
    ever does not, the connection is treated as broken and resumed from the cursor.
    """
    if os.write(sock.fileno(), data) != len(data):
        raise ConnectionClosed("the send buffer is full")
