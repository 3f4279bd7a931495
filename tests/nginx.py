"""nginx as a child of a test: foreground, everything it writes under one directory."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from .system import ensure_command


class Nginx:
    """nginx in the foreground with the configuration `conf`, its prefix `root`, answering on
    `port` once started."""

    def __init__(self, root: Path, conf: str, port: int) -> None:
        self.root, self.port = root, port
        root.mkdir(parents=True, exist_ok=True)
        (root / "nginx.conf").write_text(conf)
        self.proc = subprocess.Popen(
            [
                ensure_command("nginx", "nginx-light"),
                "-p",
                str(root),
                "-c",
                str(root / "nginx.conf"),
                "-e",
                str(root / "error.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"nginx did not start: {self.errors()}") from None
                time.sleep(0.05)  # polling the port with a deadline, not waiting blind

    def errors(self) -> str:
        log = self.root / "error.log"
        return (log.read_text() if log.exists() else "") + (self.proc.stderr.read() or "")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
