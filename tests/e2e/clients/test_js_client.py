"""Runs the JavaScript client's own suite (`npm test`: node --test) against real pushservers.

The suite lives in clients/js/test/ and starts its servers with this interpreter
(PUSHSERVER_PYTHON), so the README's one test command covers the JavaScript client too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from ...system import ensure_command

JS_DIR = Path(__file__).resolve().parents[3] / "clients" / "js"


def npm() -> str:
    """npm, installed from Debian's packages when missing and running as root."""
    return ensure_command("npm", "nodejs", "npm")


def test_js_client_suite() -> None:
    if not (JS_DIR / "node_modules").is_dir():
        install = [npm(), "ci", "--no-audit", "--no-fund"]
        subprocess.run(install, cwd=JS_DIR, check=True, timeout=180)
    result = subprocess.run(
        [npm(), "test"],
        cwd=JS_DIR,
        env={**os.environ, "PUSHSERVER_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=240,
    )
    failures = re.findall(
        r"^ *not ok .*(?:\n(?! *(?:not )?ok ).*){0,40}", result.stdout, re.MULTILINE
    )
    report = "\n".join(failures)[:8000] + result.stdout[-4000:] + result.stderr[-4000:]
    assert result.returncode == 0, report
    passed = re.search(r"^# pass (\d+)$", result.stdout, re.MULTILINE)
    failed = re.search(r"^# fail (\d+)$", result.stdout, re.MULTILINE)
    assert passed and int(passed.group(1)) > 0, report
    assert failed and int(failed.group(1)) == 0, report
