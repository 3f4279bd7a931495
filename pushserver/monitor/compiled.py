"""Whether this process runs the compiled build (docs/operations.md, "The compiled build").

The opt-in wheel replaces the hot path's modules with mypyc extension modules; a figure is read
differently for either build, so the start-up log and /stats say which one served it. The hub is
the witness: every compiled build compiles it, and the server imports it before it serves.
"""

from __future__ import annotations

import importlib.util
from importlib.machinery import ExtensionFileLoader

WITNESS = "pushserver.core.hub"


def is_extension(module: str) -> bool:
    """True when importing `module` loads a C extension rather than Python source."""
    spec = importlib.util.find_spec(module)
    return spec is not None and isinstance(spec.loader, ExtensionFileLoader)


def compiled() -> bool:
    return is_extension(WITNESS)


def word(compiled: bool) -> str:
    """`compiled` or `interpreted`: how the log line and the bench's `server:` line name a
    build."""
    return "compiled" if compiled else "interpreted"


def build() -> str:
    """The word for this process's log line."""
    return word(compiled())
