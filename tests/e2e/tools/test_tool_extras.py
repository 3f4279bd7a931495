"""A measuring tool whose optional extra is missing answers in one line naming the install
command, with exit status 2, never a traceback.

Each console script's entry point is loaded as installed and run in a subprocess in which the
extra's module is absent (`sys.modules[name] = None` is how Python marks a module that cannot be
imported, so `import` and `importlib.util.find_spec` both see it missing)."""

from __future__ import annotations

import subprocess
import sys

import pytest

RUN_WITHOUT = """
import sys
from importlib.metadata import entry_points

sys.modules[{missing!r}] = None
sys.argv = [{script!r}, *{argv!r}]
(entry,) = entry_points(group="console_scripts", name={script!r})
entry.load()()
"""

CASES = [
    ("pushserver-burnin", "locust", "burnin", ["subscribers", "--host", "http://127.0.0.1:9"]),
    ("pushserver-burnin", "psutil", "burnin", ["subscribers", "--host", "http://127.0.0.1:9"]),
    ("pushserver-bench", "psutil", "bench", ["--quick"]),
    ("pushserver-charts", "matplotlib", "charts", ["results.jsonl"]),
]


@pytest.mark.parametrize(("script", "missing", "extra", "argv"), CASES)
def test_missing_extra_is_one_line_and_exit_2(
    script: str, missing: str, extra: str, argv: list[str]
) -> None:
    code = RUN_WITHOUT.format(missing=missing, script=script, argv=argv)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{script}: needs {missing}")
    assert f"pip install 'pushserver[{extra}]'" in lines[0]
