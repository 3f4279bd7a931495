"""`scripts/compression_schemes.py`, the measurement behind the compression scheme: its byte
tables come out whole, and a timed section that did not have the CPU fails instead of
reporting."""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "compression_schemes.py"


def load():
    spec = importlib.util.spec_from_file_location("compression_schemes", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_byte_tables_cover_every_payload_and_transport(capsys):
    assert load().main(["--bytes-only", "--messages", "200"]) == 0
    out = capsys.readouterr().out
    for family in ("ticker", "chat", "telemetry", "scores"):
        for kind in ("stream", "sse", "sse-compact", "ws"):
            assert f"| {family} (" in out and f"| {kind} |" in out
    assert "GzipStream (this scheme)" in out


def test_a_section_timed_while_the_process_waited_fails():
    """Wall time without process time is what another process taking the CPU looks like."""
    schemes = load()
    idle = threading.Event()
    with pytest.raises(schemes.Busy, match="the machine was busy"):
        schemes.timed(lambda: idle.wait(schemes.SPAN))


def test_too_few_messages_are_refused():
    with pytest.raises(SystemExit):
        load().main(["--messages", "10"])
