"""A private redis-server for the two-worker rows, when none is given and one is installed."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

from pushserver_measure.ports import free_port


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def redis_url(given: str) -> Iterator[str]:
    """`given`, else a throwaway redis-server's URL, else "" when redis-server is missing."""
    binary = shutil.which("redis-server")
    if given or not binary:
        yield given
        return
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="pushserver-bench-redis-") as workdir:
        proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                workdir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while not _answers(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    yield ""
                    return
                time.sleep(0.02)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(10)
