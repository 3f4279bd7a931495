"""The Python a server runs on, said by the server: `/stats` `interpreter` and the start-up log
name the interpreter it was started with, on this venv's Python and on the system's `python3`
of the same version given the same packages, each linked as its executable's dynamic section
says."""

from __future__ import annotations

import os
import platform
import shutil
import sys
from typing import Any

import pytest

from pushserver.launcher import ServerProcess
from pushserver.monitor.interpreter import summary
from tests.pythons import OnPython, linked, output, stats, system_python

needs_ldd = pytest.mark.skipif(not shutil.which("ldd"), reason="ldd is not installed")


def said(srv: ServerProcess) -> dict[str, Any]:
    interpreter = stats(srv)["interpreter"]
    assert isinstance(interpreter, dict)
    assert any(summary(interpreter) in line for line in srv.output), srv.log
    return interpreter


@needs_ldd
def test_a_server_names_the_python_it_was_started_with() -> None:
    python = os.path.realpath(sys.executable)
    with ServerProcess() as srv:
        interpreter = said(srv)
    assert interpreter == {
        "implementation": "CPython",
        "version": platform.python_version(),
        "executable": python,
        "libpython": linked(python),
    }


@needs_ldd
@pytest.mark.skipif(not system_python(), reason="no other python3 of this version here")
def test_a_server_on_the_system_python_names_that_one() -> None:
    python = system_python()
    with OnPython(python) as srv:
        interpreter = said(srv)
    assert interpreter["executable"] == python != os.path.realpath(sys.executable)
    assert interpreter["version"] == output(
        python, "-c", "import platform; print(platform.python_version())"
    )
    assert interpreter["libpython"] == linked(python)
