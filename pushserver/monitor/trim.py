"""Memory handed back to the system once the C allocator holds much of it free.

Python's small-object allocator gives its 1 MiB arenas back as soon as they are empty; what
the C allocator (glibc's malloc) frees inside its heap it keeps, so after a sweep of many
channels' histories (each a buffer past the small-object size, `core.history`) or the end of a
flood, the process stays at its worst hour's size. `Trimmer.check`, run every sweep interval,
asks glibc how much it holds free (`mallinfo2`) and, once that has grown by `TRIM_AT` since the
last trim, gives the free pages back (`malloc_trim(0)`). Measured before and after in
docs/operations.md ("Memory handed back"). On a C library without these calls (musl), it does
nothing. Under jemalloc (`pushserver.reexec`), which keeps no free pages past its decay time,
the check asks it to give back those due (`Jemalloc.decay`) instead.
"""

from __future__ import annotations

import ctypes
import logging

from .allocator import Jemalloc, describe
from .process import rss_bytes

log = logging.getLogger("pushserver")

TRIM_AT = 8 << 20
"""Bytes glibc must hold free, more than after the last trim, before the next one."""


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _glibc() -> ctypes.CDLL | None:
    """The process's C library, if it has glibc's `mallinfo2` and `malloc_trim`."""
    libc = ctypes.CDLL(None)
    if not (hasattr(libc, "mallinfo2") and hasattr(libc, "malloc_trim")):
        return None
    libc.mallinfo2.restype = _MallInfo2
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    return libc


class Trimmer:
    """Gives the C allocator's free pages back when it holds `TRIM_AT` more than it did."""

    __slots__ = ("allocator", "floor", "jemalloc", "libc", "returned", "trims")

    def __init__(self) -> None:
        self.allocator = describe()
        """What `/stats` shows: the allocators this process runs on."""
        self.jemalloc = Jemalloc.running()
        self.libc = None if self.jemalloc else _glibc()
        self.trims = 0
        self.returned = 0
        """Bytes of RSS the trims gave back, summed."""
        self.floor = self.free()
        """The least glibc held free since the last trim (or the start)."""

    def free(self) -> int:
        """Bytes glibc holds free in its heaps (0 without glibc)."""
        return 0 if self.libc is None else int(self.libc.mallinfo2().fordblks)

    def check(self) -> None:
        """Trim if glibc holds `TRIM_AT` more free than at its lowest since the last trim (a
        trim leaves the free chunks free, their pages given back: the count restarts there).
        Under jemalloc, give back now what its decay has made due."""
        if self.jemalloc is not None:
            self.jemalloc.decay()
        if self.libc is None:
            return
        free = self.free()
        if free < self.floor + TRIM_AT:
            self.floor = min(self.floor, free)
            return
        before = rss_bytes()
        self.libc.malloc_trim(0)
        returned = max(0, before - rss_bytes())
        self.trims += 1
        self.returned += returned
        self.floor = free
        log.debug("malloc_trim gave back %d bytes", returned)
