"""Which Python a process runs on (`/stats` `interpreter`): the file mapped where the C API's
code lies, told apart as the executable itself (static) or a `libpython` (shared); and, for
every CPython on this machine, the same answer as its executable's dynamic section (`ldd`)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys

import pytest

from pushserver.monitor.interpreter import describe, linkage, mapped_file, summary
from tests.pythons import ROOT, linked, system_python

PYENV = "/root/.pyenv/versions/3.11.7"
ANONYMOUS = " " * 26  # the kernel pads the path column, and leaves it blank without a file

SHARED_MAPS = "\n".join(
    [
        f"5581c6a5e000-5581c6a5f000 r--p 00000000 fe:00 18650   {PYENV}/bin/python3.11",
        f"5581c6a5f000-5581c6a60000 r-xp 00001000 fe:00 18650   {PYENV}/bin/python3.11",
        "5581c8313000-5581c8455000 rw-p 00000000 00:00 0        [heap]",
        f"7f548c000000-7f548c0f5000 r--p 00000000 fe:00 18710   {PYENV}/lib/libpython3.11.so.1.0",
        f"7f548c0f5000-7f548c331000 r-xp 000f5000 fe:00 18710   {PYENV}/lib/libpython3.11.so.1.0",
        f"7f548c400000-7f548c600000 rw-p 00000000 00:00 0 {ANONYMOUS}",
        "7ffd2b5e1000-7ffd2b602000 rw-p 00000000 00:00 0        [stack]",
    ]
)

STATIC_MAPS = "\n".join(
    [
        "00400000-0041f000 r--p 00000000 fe:00 247702    /usr/bin/python3.11",
        "0041f000-006d2000 r-xp 0001f000 fe:00 247702    /usr/bin/python3.11",
        f"7f1a2c000000-7f1a2c021000 rw-p 00000000 00:00 0 {ANONYMOUS}",
        "7f1a2d7e5000-7f1a2d80b000 r-xp 00001000 fe:00 30145   /usr/lib/x86_64-linux-gnu/libc.so.6",
    ]
)


def test_the_file_holding_an_address_is_read_from_the_maps_text() -> None:
    assert mapped_file(SHARED_MAPS, 0x7F548C2506C0).endswith("/lib/libpython3.11.so.1.0")
    assert mapped_file(SHARED_MAPS, 0x5581C6A5F010) == f"{PYENV}/bin/python3.11"
    assert mapped_file(STATIC_MAPS, 0x523600) == "/usr/bin/python3.11"
    assert mapped_file(STATIC_MAPS, 0x0041F000) == "/usr/bin/python3.11"  # first byte inside
    assert mapped_file(STATIC_MAPS, 0x006D2000) == ""  # the end is outside, and nothing follows
    assert mapped_file(SHARED_MAPS, 0x7F548C400010) == ""  # anonymous
    assert mapped_file(SHARED_MAPS, 0x5581C8313000) == "[heap]"
    assert mapped_file("", 0x523600) == ""
    assert mapped_file("garbage\n\nzz-yy r-xp\n", 0x523600) == ""


def test_a_path_with_spaces_or_a_deleted_file_is_kept_whole() -> None:
    maps = (
        "00400000-006d2000 r-xp 0001f000 fe:00 247702   /opt/my python/bin/python3.11 (deleted)\n"
    )
    assert mapped_file(maps, 0x500000) == "/opt/my python/bin/python3.11 (deleted)"
    # /proc/self/exe names a replaced executable the same way as the maps do
    exe = "/opt/my python/bin/python3.11 (deleted)"
    assert linkage(mapped_file(maps, 0x500000), exe) == "static"


def test_the_interpreter_is_static_in_its_executable_and_shared_in_a_libpython() -> None:
    exe = "/usr/bin/python3.11"
    assert linkage(mapped_file(STATIC_MAPS, 0x523600), exe) == "static"
    pyenv = f"{PYENV}/bin/python3.11"
    assert linkage(mapped_file(SHARED_MAPS, 0x7F548C2506C0), pyenv) == "shared"
    assert linkage(mapped_file(SHARED_MAPS, 0x5581C6A5F010), pyenv) == "static"
    # an embedding program's own library, or nothing found: never guessed
    assert linkage("/usr/lib/uwsgi/plugins/python311_plugin.so", "/usr/bin/uwsgi") == "unknown"
    assert linkage("", exe) == "unknown"
    assert linkage("[heap]", exe) == "unknown"


def test_the_summary_names_version_executable_and_linkage() -> None:
    said = {
        "implementation": "CPython",
        "version": "3.11.2",
        "executable": "/usr/bin/python3.11",
        "libpython": "static",
    }
    assert summary(said) == "CPython 3.11.2 (/usr/bin/python3.11, libpython static)"


def test_this_process_names_its_own_interpreter() -> None:
    said = describe()
    assert said["implementation"] == platform.python_implementation()
    assert said["version"] == platform.python_version()
    assert said["executable"] == os.path.realpath(sys.executable)
    assert said["libpython"] in ("static", "shared")


PYTHONS = [os.path.realpath(sys.executable), *filter(None, [system_python()])]


@pytest.mark.skipif(not shutil.which("ldd"), reason="ldd is not installed")
@pytest.mark.parametrize("python", PYTHONS)
def test_every_python_here_agrees_with_its_dynamic_section(python: str) -> None:
    """A process on `python` says `shared` exactly when the executable needs a libpython."""
    code = "import json; from pushserver.monitor import interpreter; "
    code += "print(json.dumps(interpreter.describe()))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    said = json.loads(out.stdout)
    assert said["executable"] == python
    assert said["libpython"] == linked(python)
