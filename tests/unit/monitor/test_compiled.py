"""The check behind `/stats` `compiled` and the start-up log's build word."""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES

import pushserver.core.hub
from pushserver.monitor.compiled import build, compiled, is_extension


def test_an_extension_module_is_told_from_python_source() -> None:
    assert is_extension("uvloop.loop")  # a C extension the server always imports
    assert not is_extension("pushserver.launcher")  # never compiled
    assert not is_extension("pushserver.no_such_module")


def test_compiled_when_the_hub_this_process_imported_is_an_extension() -> None:
    """The same answer as the file the hub came from: False from the source tree, True in the
    test command's compiled stage (scripts/test.sh), which runs this file against the wheel."""
    loaded = pushserver.core.hub.__file__ or ""
    assert compiled() is loaded.endswith(tuple(EXTENSION_SUFFIXES))
    assert build() == ("compiled" if compiled() else "interpreted")
