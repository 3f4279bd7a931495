"""The ports the tools pick for the processes they start: free, and out of the kernel's
ephemeral range, where an outgoing connection could take one before its process binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from pushserver_measure import ports


def bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.mark.skipif(not ports.EPHEMERAL.exists(), reason="the ephemeral range is Linux's")
def test_a_port_is_free_and_below_the_ephemeral_range() -> None:
    first = int(ports.EPHEMERAL.read_text().split()[0])
    chosen = [ports.free_port() for _ in range(20)]
    assert all(ports.LOWEST <= port < first and bindable(port) for port in chosen), chosen


def test_a_port_taken_is_not_chosen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setattr(ports, "LOWEST", port)
        monkeypatch.setattr(ports, "EPHEMERAL", tmp_path / "range")
        (tmp_path / "range").write_text(f"{port + 1}\t60999\n")  # the one candidate is taken
        chosen = ports.free_port()
    assert chosen != port and chosen > 0


def test_without_the_range_the_system_picks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ports, "EPHEMERAL", tmp_path / "missing")
    port = ports.free_port()
    assert port > 0 and bindable(port)
