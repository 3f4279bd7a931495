"""`scripts/delivery_cost.py`: its harness runs the cycle it counts (every poll answered with each
message and held again) against this tree, and bad input is refused before valgrind runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "delivery_cost.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


def test_the_harness_answers_every_poll_and_holds_its_re_poll() -> None:
    done = run("--cycle", "50", "4")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        ((), "name at least one tree"),
        (("installed", "--held", "0"), "--held must be at least 1"),
        ((str(ROOT / "docs"),), "is not a source tree"),
    ],
)
def test_bad_input_is_refused_with_its_reason(args: tuple[str, ...], refusal: str) -> None:
    done = run(*args)
    assert done.returncode == 2
    assert refusal in done.stderr
