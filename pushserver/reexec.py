"""The `pushserver` command serves on jemalloc with the Redis broker (or when asked): it
replaces its interpreter, once and before it serves, with one that has jemalloc preloaded and
takes every object from `malloc`.

Python's small-object allocator gives a 1 MiB arena back only once every block in it is free,
and after a flood of fresh channels on the Redis broker a few hundred long-lived blocks keep a
hundred arenas resident; jemalloc gives freed pages back by itself (its decay), and the same
flood comes back within its bound (docs/operations.md, "Memory handed back"). The interpreter
reads `PYTHONMALLOC` only as it starts, and a process's `malloc` is replaced only by the
dynamic linker as a program starts (`LD_PRELOAD`, ld.so(8)), so the choice is an `execve` of
the same command line (the process keeps its id, its open files and its parent).

Done only when `--allocator` wants jemalloc (`monitor.allocator.wanted`: `auto` with `--redis`,
or `jemalloc`), the operator set neither `PYTHONMALLOC` nor `LD_PRELOAD` (theirs are kept as
they are) and the dynamic linker knows jemalloc; otherwise
the server serves in the interpreter it was started in, and says which (`/stats` `allocator`,
its ready log line).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping

OPERATORS = ("PYTHONMALLOC", "LD_PRELOAD")
"""Variables that, set by the operator, leave the allocator as they chose it."""


def environment(
    allocator: str, environ: Mapping[str, str], library: Callable[[], str]
) -> dict[str, str] | None:
    """The environment to serve in on jemalloc (`library()`: its name, "" when it is not
    installed), or None to serve as started: the allocator wanted is `pymalloc`, the operator
    chose (one of `OPERATORS` set; after the `execve`, this module's own choice), or jemalloc
    is not installed. `library` is called last, only when the rest allows the `execve`: the
    lookup runs a subprocess, and the replaced interpreter knows its answer from `LD_PRELOAD`."""
    if allocator != "jemalloc" or any(environ.get(name) for name in OPERATORS):
        return None
    found = library()
    return {**environ, "PYTHONMALLOC": "malloc", "LD_PRELOAD": found} if found else None


def replace(environ: Mapping[str, str]) -> None:
    """Run this process's command line again in `environ`; does not return."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, environ)
