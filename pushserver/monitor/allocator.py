"""Which memory allocators this process runs on, for `/stats`, and jemalloc's own controls.

Objects come from Python's allocator (`PYTHONMALLOC`, read once as the interpreter starts:
pymalloc unless set), buffers past its small-object size and everything under
`PYTHONMALLOC=malloc` from the C library's `malloc`, which is glibc's unless another is
preloaded (`pushserver.reexec` preloads jemalloc). jemalloc answers `mallctl`, the interface it
documents for its statistics and purging (jemalloc(3)); nothing else in the process does.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

ARENAS_ALL = 4096
"""jemalloc's `MALLCTL_ARENAS_ALL`: `arena.<i>.*` with this index acts on every arena."""


@functools.cache
def jemalloc_library() -> str:
    """jemalloc's shared library as the dynamic linker names it (`libjemalloc.so.2`), or ""
    when it is not installed. Looked up once per process: `find_library` runs `ldconfig -p`
    (and the C compiler when that finds nothing), a subprocess each, and the answer holds
    while the process runs."""
    return ctypes.util.find_library("jemalloc") or ""


def wanted(setting: str, redis: bool) -> str:
    """The allocator `--allocator` asks for, `jemalloc` or `pymalloc`. `auto` is jemalloc on the
    Redis broker, where Python's own keeps a flood's arenas resident, and Python's own on the
    memory broker, where a flood's memory comes back on either and a held subscriber costs
    0.14 KB less on Python's own (docs/performance.md, "Memory handed back on Redis: four
    allocators side by side")."""
    if setting == "auto":
        return "jemalloc" if redis else "pymalloc"
    return setting


def python_allocator() -> str:
    """The interpreter's allocator as it started: `PYTHONMALLOC`, unless the environment was
    ignored (`-E`, `-I`), else its default."""
    chosen = "" if sys.flags.ignore_environment else os.environ.get("PYTHONMALLOC", "")
    return chosen or "pymalloc"


MALLCTL = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.c_void_p,
    ctypes.c_size_t,
)
"""`int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)`."""


class Jemalloc:
    """jemalloc's `mallctl`, when it is the process's `malloc`."""

    __slots__ = ("_mallctl",)

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._mallctl = MALLCTL(("mallctl", libc))

    @classmethod
    def running(cls) -> Jemalloc | None:
        libc = ctypes.CDLL(None)
        return cls(libc) if hasattr(libc, "mallctl") else None

    def version(self) -> str:
        value = ctypes.c_char_p()
        size = ctypes.c_size_t(ctypes.sizeof(value))
        if self._mallctl(b"version", ctypes.byref(value), ctypes.byref(size), None, 0):
            return "?"
        return (value.value or b"?").decode().split("-")[0]

    def decay(self) -> None:
        """Give back the pages due by jemalloc's decay now (`arena.<all>.decay`), rather than
        at its next allocations: an idle server makes few, and jemalloc runs no thread of its
        own unless asked (`background_thread`)."""
        self._mallctl(f"arena.{ARENAS_ALL}.decay".encode(), None, None, None, 0)


def c_allocator() -> str:
    """`jemalloc 5.3.0`, `glibc 2.36`, or `libc` (neither answers)."""
    jemalloc = Jemalloc.running()
    if jemalloc is not None:
        return f"jemalloc {jemalloc.version()}"
    libc = ctypes.CDLL(None)
    if hasattr(libc, "gnu_get_libc_version"):
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        return f"glibc {libc.gnu_get_libc_version().decode()}"
    return "libc"


def describe() -> dict[str, str]:
    """`{"python": "malloc", "c": "jemalloc 5.3.0"}`: what `/stats` shows as `allocator`."""
    return {"python": python_allocator(), "c": c_allocator()}


def missing(allocator: str, running: str) -> str:
    """What to warn of when the allocator `wanted` is jemalloc and it is not installed (""),
    in a process running on the C allocator `running` (`c_allocator`). One running on
    jemalloc has it: the process `pushserver.reexec` started, whose command found it, does
    not look for it again."""
    if allocator != "jemalloc" or running.startswith("jemalloc ") or jemalloc_library():
        return ""
    return (
        "jemalloc is not installed: serving on Python's own allocator, which gives less memory "
        "back after a flood of channels (docs/operations.md, Memory handed back)"
    )
