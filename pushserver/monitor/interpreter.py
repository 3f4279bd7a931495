"""Which Python runs this process, for `/stats` and the start-up log.

The server's CPU per publish and per delivery depends on how its CPython was built
(docs/operations.md, "Which Python to run it on"): an interpreter linked into its executable
and built with profile-guided optimisation and LTO (Debian's `/usr/bin/python3`) runs the same
code faster than one whose loop sits in a shared `libpython` (pyenv's default build). A figure
is only reproducible with the build named. `sysconfig` cannot tell the two apart: Debian's
static executable reports `Py_ENABLE_SHARED = 1`, for the `libpython` shipped beside it. The
process itself can: the file mapped where the C API's own code lies (`PyEval_EvalCode`, in
/proc/self/maps) is either the executable or a `libpython` library.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys
from pathlib import PurePath

MAPS = "/proc/self/maps"
EXECUTABLE = "/proc/self/exe"


def mapped_file(maps: str, address: int) -> str:
    """The file whose mapping in `maps` (the text of /proc/PID/maps) holds `address`: its path
    as the kernel prints it, "" when the address lies in no mapping or an anonymous one."""
    for line in maps.splitlines():
        span, _, rest = line.partition(" ")
        low, _, high = span.partition("-")
        try:
            inside = int(low, 16) <= address < int(high, 16)
        except ValueError:
            continue
        if inside:
            fields = rest.split(maxsplit=4)  # perms, offset, device, inode, path
            return fields[4] if len(fields) == 5 else ""
    return ""


def linkage(holder: str, executable: str) -> str:
    """`static` when the interpreter's code (`holder`, from `mapped_file`) is the executable's,
    `shared` when it is a `libpython` library's, `unknown` otherwise (not found, or some other
    program embedding Python in a library of its own name)."""
    if holder and holder == executable:
        return "static"
    if PurePath(holder).name.startswith("libpython"):
        return "shared"
    return "unknown"


def _read(path: str) -> str:
    try:
        with open(path) as maps:
            return maps.read()
    except OSError:
        return ""


def _executable() -> str:
    """The program this process runs, as the kernel names it (a venv's `bin/python` resolved
    to the interpreter it links to), else `sys.executable`."""
    try:
        return os.readlink(EXECUTABLE)
    except OSError:
        return sys.executable


@functools.cache
def describe() -> dict[str, str]:
    """`{"implementation": "CPython", "version": "3.11.2", "executable": "/usr/bin/python3.11",
    "libpython": "static"}`: what `/stats` shows as `interpreter`. Read once: a process keeps
    its interpreter."""
    executable = _executable()
    code = ctypes.cast(ctypes.pythonapi.PyEval_EvalCode, ctypes.c_void_p).value or 0
    return {
        "implementation": platform.python_implementation(),
        "version": platform.python_version(),
        "executable": executable,
        "libpython": linkage(mapped_file(_read(MAPS), code), executable),
    }


def summary(interpreter: dict[str, str]) -> str:
    """One line for logs and tables: `CPython 3.11.2 (/usr/bin/python3.11, libpython static)`."""
    return (
        f"{interpreter['implementation']} {interpreter['version']} "
        f"({interpreter['executable']}, libpython {interpreter['libpython']})"
    )
