"""The systemd unit of docs/operations.md, as written, passes `systemd-analyze verify`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).parents[3] / "docs" / "operations.md"
UNIT_HEADER = "# /etc/systemd/system/pushserver.service\n"
DOC_EXECUTABLE = "/opt/pushserver/bin/pushserver"


def documented_unit() -> str:
    units = [
        b
        for b in re.findall(r"```ini\n(.*?)```", DOC.read_text(), re.S)
        if b.startswith(UNIT_HEADER)
    ]
    assert len(units) == 1, "docs/operations.md must hold exactly one pushserver.service block"
    return units[0]


def test_documented_unit_names_what_operators_need():
    unit = documented_unit()
    for directive in ("LimitNOFILE=", "EnvironmentFile=", "--workers", "KillSignal=SIGTERM"):
        assert directive in unit, directive


def test_documented_unit_passes_systemd_analyze_verify(tmp_path: Path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    unit = documented_unit()
    assert unit.count(DOC_EXECUTABLE) == 1
    # verify checks that ExecStart's program exists: point it at the installed command.
    installed = Path(sys.executable).parent / "pushserver"
    path = tmp_path / "pushserver.service"
    path.write_text(unit.replace(DOC_EXECUTABLE, str(installed)))
    result = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True)
    # Unknown or misspelt directives are only warned about, so any output is a finding.
    assert (result.returncode, result.stdout + result.stderr) == (0, "")
