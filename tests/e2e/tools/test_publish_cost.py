"""`scripts/publish_cost.py` against this tree, with Python's opcode counter (no valgrind): a
long-poll subscriber is answered every message and polls again, so every publish is delivered
and counted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "publish_cost.py"


def count(*args: str) -> float:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(ROOT), "--opcodes", "--publishes", "20", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r": ([\d,.]+) Python opcodes and [\d,.]+ Python calls", done.stdout)
    assert found, done.stdout
    return float(found[1].replace(",", ""))


def test_long_poll_subscribers_are_answered_and_poll_again() -> None:
    alone = count("--subscribers", "0")
    one = count("--subscribers", "1", "--transport", "longpoll")
    three = count("--subscribers", "3", "--transport", "longpoll")
    assert alone < one < three, (alone, one, three)  # each poll's answer and re-poll counted
