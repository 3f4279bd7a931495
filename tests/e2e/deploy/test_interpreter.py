"""The Python a server runs on, said by the server: `/stats` `interpreter` and the start-up log
name the interpreter it was started with, on this venv's Python and on the system's `python3`
of the same version (on Debian: linked statically, built with PGO and LTO) given the same
packages, each linked as its executable's dynamic section says."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pushserver.launcher import ServerProcess
from pushserver.monitor.interpreter import summary

ROOT = Path(__file__).resolve().parents[3]


class OnPython(ServerProcess):
    """A server run by another interpreter, importing this tree and this venv's packages."""

    def __init__(self, python: str) -> None:
        packages = os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]])
        super().__init__(env={"PYTHONPATH": packages})
        self.python = python

    def command(self, port: int) -> list[str]:
        return [self.python, *super().command(port)[1:]]


def system_python() -> str:
    """The system's `python3` when it is another executable of this Python's version ("" when
    there is none): the venv's compiled packages load in it."""
    found = shutil.which("python3", path="/usr/bin:/bin")
    if not found or os.path.realpath(found) == os.path.realpath(sys.executable):
        return ""
    version = output(found, "-c", "import sys; print(sys.version_info[:2])")
    return os.path.realpath(found) if version == str(sys.version_info[:2]) else ""


def output(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, timeout=60).stdout.strip()


def expected_linkage(python: str) -> str:
    return "shared" if "libpython" in output("ldd", python) else "static"


def said(srv: ServerProcess) -> dict[str, Any]:
    with urllib.request.urlopen(srv.url + "/stats", timeout=10) as answer:
        got = json.load(answer)
    assert isinstance(got, dict)
    interpreter = got["interpreter"]
    assert isinstance(interpreter, dict)
    assert any(summary(interpreter) in line for line in srv.output), srv.log
    return interpreter


@pytest.mark.skipif(not shutil.which("ldd"), reason="ldd is not installed")
def test_a_server_names_the_python_it_was_started_with() -> None:
    python = os.path.realpath(sys.executable)
    with ServerProcess() as srv:
        interpreter = said(srv)
    assert interpreter == {
        "implementation": "CPython",
        "version": platform.python_version(),
        "executable": python,
        "libpython": expected_linkage(python),
    }


@pytest.mark.skipif(not shutil.which("ldd"), reason="ldd is not installed")
@pytest.mark.skipif(not system_python(), reason="no other python3 of this version here")
def test_a_server_on_the_system_python_names_that_one() -> None:
    python = system_python()
    with OnPython(python) as srv:
        interpreter = said(srv)
    assert interpreter["executable"] == python
    assert interpreter["version"] == output(
        python, "-c", "import platform; print(platform.python_version())"
    )
    assert interpreter["libpython"] == expected_linkage(python)
    assert interpreter["executable"] != os.path.realpath(sys.executable)
