"""`--workers N`: N server processes on one port (SO_REUSEPORT), sharing channels through Redis.

The supervisor binds every worker's socket before forking, so `--port 0` gives all of them the
same port, prints the ready line once all workers listen, forwards SIGTERM/SIGINT and exits when
they have. A worker that dies unexpectedly is replaced on a fresh socket.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import select
import signal
import socket
import sys
import time

from .config import ConfigError, Settings
from .web.server import listening_socket, raise_open_file_limit, run_worker, url_for

log = logging.getLogger("pushserver.workers")

RESPAWN_DELAY = 1.0
"""Seconds before replacing a crashed worker, so a worker that cannot start does not spin."""


def supervise(settings: Settings) -> None:
    raise_open_file_limit(settings)
    first = listening_socket(settings)
    settings = dataclasses.replace(settings, port=first.getsockname()[1])
    sockets = [first] + [listening_socket(settings) for _ in range(settings.workers - 1)]
    sys.exit(Supervisor(settings).run(sockets))


class Supervisor:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.children: dict[int, int] = {}
        """pid -> worker index"""
        self.stopping = False
        self.exit_code = 0

    def run(self, sockets: list[socket.socket]) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        ready_r, ready_w = os.pipe()
        for index, sock in enumerate(sockets):
            self._spawn(index, sock, sockets, ready_w)
        os.close(ready_w)
        for sock in sockets:
            sock.close()  # only the workers listen: a dead worker's socket must go with it
        if self._await_ready(ready_r):
            url = url_for(self.settings.host, self.settings.port)
            print(f"pushserver listening on {url}", flush=True)
        os.close(ready_r)
        self._reap()
        return self.exit_code

    def _spawn(
        self, index: int, sock: socket.socket, sockets: list[socket.socket], ready_w: int | None
    ) -> None:
        pid = os.fork()
        if pid:
            self.children[pid] = index
            return
        code = 0
        try:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            for other in sockets:
                if other is not sock:
                    other.close()
            run_worker(self.settings, sock, index, lambda url: _ready(ready_w, index))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            log.exception("worker %d failed", index)
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _await_ready(self, ready_r: int) -> bool:
        """Wait until every worker listens; False if one died first or we were told to stop."""
        ready: set[int] = set()
        pending = b""
        while len(ready) < len(self.children) and not self.stopping:
            readable, _, _ = select.select([ready_r], [], [], 0.2)
            if readable:
                data = os.read(ready_r, 4096)
                if not data:
                    break
                *lines, pending = (pending + data).split(b"\n")
                ready.update(int(line) for line in lines)
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid:
                index = self.children.pop(pid, None)
                log.error("worker %s exited before listening (%s)", index, _describe(status))
                self.exit_code = 1
                self._stop()
                return False
        return len(ready) >= len(self.children) and not self.stopping

    def _reap(self) -> None:
        """Wait for the workers; replace any that dies while we are not stopping."""
        while self.children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            index = self.children.pop(pid, None)
            if index is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            if self.stopping:
                if code != 0:
                    self.exit_code = 1
                continue
            log.error("worker %d (pid %d) %s; starting a new one", index, pid, _describe(status))
            time.sleep(RESPAWN_DELAY)
            if self.stopping:
                continue
            try:
                sock = listening_socket(self.settings)
            except ConfigError as exc:
                log.error("worker %d: %s", index, exc)
                self.exit_code = 1
                self._stop()
                continue
            self._spawn(index, sock, [sock], None)
            sock.close()

    def _stop(self, signum: int = signal.SIGTERM, frame: object = None) -> None:
        self.stopping = True
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def _ready(ready_w: int | None, index: int) -> None:
    if ready_w is not None:
        os.write(ready_w, b"%d\n" % index)
        os.close(ready_w)


def _describe(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
