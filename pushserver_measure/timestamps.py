"""When bytes arrived, not when they were read: the kernel's receive timestamp of a read.

A client that shares the machine's cores with the server reads an answer a while after the
server wrote it, so a latency timed at the read is partly the client's own. A socket that asks
(`enable`) gets, with each `recvmsg`, the receive time of the last segment read
(`SO_TIMESTAMPNS`); on loopback the kernel stamps a segment in the sender's write. Both the
bench (asyncio) and the burn-in's probe (gevent) read this way.

Linux stamps received segments only while some socket asks for it, and turns stamping on a
moment after the first one asks (from a work queue), so a process first holds a socket that
asks and waits until a segment comes back stamped (`Switch`).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
"""Linux's option (and ancillary message type); Python's socket module does not name it."""
_STAMP = struct.Struct("@qq")  # struct timespec: seconds, nanoseconds
ANCILLARY = socket.CMSG_SPACE(_STAMP.size)
"""Room for a read's timestamp: `recvmsg`'s `ancbufsize`."""

SWITCH_WAIT = 10.0
"""Seconds to wait for the kernel to begin stamping before giving up."""
SWITCH_PAUSE = 0.005
"""Seconds between two looks at whether stamping is on."""
_KEPT: list[socket.socket] = []
"""The socket that keeps stamping on for this process's life, once it is on."""


class NoTimestamps(OSError):
    """This system gives no receive timestamps on TCP sockets."""


def stamp(ancillary: list[tuple[int, int, bytes]]) -> float | None:
    """The receive time (epoch seconds) in a read's ancillary data, or None."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanoseconds = _STAMP.unpack_from(data)
            return seconds + nanoseconds * 1e-9
    return None


def enable(sock: socket.socket) -> None:
    """Ask for receive timestamps on `sock`; NoTimestamps where the system has none."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError as exc:
        raise NoTimestamps(f"no receive timestamps on this system: {exc}") from None


class Switch:
    """A loopback pair whose receiving end asks for timestamps, looked at until a segment comes
    back stamped; that end is then kept open, which keeps stamping on for the process."""

    def __init__(self) -> None:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            self.sender = socket.create_connection(listener.getsockname())
            self.receiver, _ = listener.accept()
        try:
            enable(self.receiver)
        except BaseException:
            self.close()
            raise
        self.deadline = time.monotonic() + SWITCH_WAIT

    def on(self) -> bool:
        """Whether stamping is on, by one byte sent and read back (the switch is done with once
        it is); NoTimestamps once `SWITCH_WAIT` has passed without a stamp."""
        try:
            self.sender.sendall(b".")
            _, ancillary, _, _ = self.receiver.recvmsg(1, ANCILLARY)
        except BaseException:
            self.close()
            raise
        if stamp(ancillary) is not None:
            self.sender.close()
            if _KEPT:  # another wait in this process got there first
                self.receiver.close()
            else:
                _KEPT.append(self.receiver)
            return True
        if time.monotonic() > self.deadline:
            self.close()
            raise NoTimestamps(f"no receive timestamp within {SWITCH_WAIT:g} s")
        return False

    def close(self) -> None:
        self.sender.close()
        self.receiver.close()


def switched_on() -> bool:
    """Whether this process already keeps stamping on."""
    return bool(_KEPT)


def switch_on(pause: Callable[[float], None]) -> None:
    """Return once received segments are stamped, keeping them so for this process;
    `pause(seconds)` waits between looks (`time.sleep`, `gevent.sleep`)."""
    if switched_on():
        return
    switch = Switch()
    while not switch.on():
        pause(SWITCH_PAUSE)
