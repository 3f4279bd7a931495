"""The CPythons on this machine a test can start a server on: this venv's, and the system's
`python3` of the same version (on Debian: linked statically, built with PGO and LTO), given this
tree and this venv's packages; and how each is linked, as its executable's dynamic section
(`ldd`) says."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import urllib.request
from pathlib import Path
from typing import Any

from pushserver.launcher import ServerProcess

ROOT = Path(__file__).resolve().parents[1]


class OnPython(ServerProcess):
    """A server run by `python`, importing this tree and this venv's packages."""

    def __init__(self, python: str) -> None:
        packages = os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]])
        super().__init__(env={"PYTHONPATH": packages})
        self.python = python

    def command(self, port: int) -> list[str]:
        return [self.python, *super().command(port)[1:]]


def output(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, timeout=60).stdout.strip()


def system_python() -> str:
    """The system's `python3` when it is another executable of this Python's version ("" when
    there is none): the venv's compiled packages load in it."""
    found = shutil.which("python3", path="/usr/bin:/bin")
    if not found or os.path.realpath(found) == os.path.realpath(sys.executable):
        return ""
    version = output(found, "-c", "import sys; print(sys.version_info[:2])")
    return os.path.realpath(found) if version == str(sys.version_info[:2]) else ""


def linked(python: str) -> str:
    """`shared` when `python` needs a libpython library, `static` when it does not."""
    return "shared" if "libpython" in output("ldd", python) else "static"


def stats(srv: ServerProcess) -> dict[str, Any]:
    with urllib.request.urlopen(srv.url + "/stats", timeout=10) as answer:
        got = json.load(answer)
    assert isinstance(got, dict)
    return got
