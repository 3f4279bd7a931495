"""Start a pushserver in a child process and wait until it listens.

Used by the tests, the bench and the burn-in: they all need a real server on an ephemeral
loopback port, and must learn the port from the server itself (`--port 0`) to avoid races.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from types import TracebackType

READY_RE = re.compile(r"pushserver listening on (http://\S+)")


class ServerError(RuntimeError):
    """The server did not come up; the message carries what it printed."""


class ServerProcess:
    """`with ServerProcess(["--heartbeat", "1"]) as srv: srv.url` runs one server.

    A subclass runs another server the same way: its `module` (run with `--host` and
    `--port`), and the line (`ready`) that says it listens and where."""

    name = "pushserver"
    module = "pushserver"
    ready = READY_RE

    def __init__(
        self,
        args: Sequence[str] = (),
        host: str = "127.0.0.1",
        ready_timeout: float = 30.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.args = list(args)
        self.host = host
        self.ready_timeout = ready_timeout
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.port = 0
        self.output: list[str] = []

    def command(self, port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            self.module,
            "--host",
            self.host,
            "--port",
            str(port),
            *self.args,
        ]

    def start(self, port: int | None = None) -> ServerProcess:
        env = {**os.environ, **(self.env or {}), "PYTHONUNBUFFERED": "1"}
        self.output = []
        self.proc = subprocess.Popen(
            self.command(self.port if port is None else port),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        ready = threading.Event()
        threading.Thread(target=self._pump, args=(self.proc, ready), daemon=True).start()
        if not ready.wait(self.ready_timeout) or not self.url:
            self.kill()
            raise ServerError(f"{self.name} did not start:\n" + "".join(self.output[-30:]))
        return self

    def _pump(self, proc: subprocess.Popen[str], ready: threading.Event) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.output.append(line)
            if len(self.output) > 2000:
                del self.output[:1000]
            match = self.ready.search(line)
            if match and not ready.is_set():
                self.url = match.group(1)
                self.port = int(self.url.rsplit(":", 1)[1])
                ready.set()
        ready.set()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Signal the server and wait; kills it if it outlives `timeout`. Returns the exit code."""
        proc = self.proc
        if proc is None:
            return 0
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> ServerProcess:
        """Stop and start again on the same port (memory broker: a new epoch)."""
        self.stop()
        deadline = time.monotonic() + 10
        while True:
            try:
                return self.start(self.port)
            except ServerError:
                if time.monotonic() > deadline:
                    raise

    @property
    def log(self) -> str:
        return "".join(self.output)

    def __enter__(self) -> ServerProcess:
        return self.start(0) if self.proc is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
