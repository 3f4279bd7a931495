"""The probe: one independent, lightly loaded subscriber in its own process.

It reports its own latency beside the crowd's, so a reader can tell latency the server causes
(the probe sees it too) from latency the busy load generator causes (only the crowd sees it).
It times a delivery when its bytes arrived (the kernel's receive timestamp), not when it read
them, so its own wait for a core is not counted.
Run by the controller as `python -m pushserver_burnin.probe URL TRANSPORT CHANNEL`; one JSON
line per event on stdout.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import sys
import time
from typing import Any

import gevent
import gevent.event
import gevent.subprocess
import orjson

from pushserver_burnin.subscribers import TRANSPORTS
from pushserver_burnin.tally import StepBook
from pushserver_measure import timestamps
from pushserver_measure.http11 import Endpoint
from pushserver_measure.tuning import quiet_gc

_PR_SET_PDEATHSIG = 1


class PrintingSink:
    """Subscriber sink that writes each event as one JSON line for the controller."""

    def _emit(self, obj: dict[str, Any]) -> None:
        sys.stdout.buffer.write(orjson.dumps(obj) + b"\n")
        sys.stdout.flush()

    def subscribed(self, channel: str) -> None:
        self._emit({"subscribed": channel})

    def delivered(self, envelope: dict[str, Any], received: float, size: int, dup: bool) -> None:
        data = envelope.get("data")
        if type(data) is dict and "step" in data:
            self._emit(
                {
                    "step": data["step"],
                    "dup": dup,
                    "e2e": received - data["t"],
                    "fanout": received - envelope["ts"],
                }
            )

    def gap(self, event: dict[str, Any]) -> None:
        self._emit({"gap": event})

    def reconnecting(self, error: BaseException) -> None:
        self._emit({"reconnect": str(error)})


def _die_with_parent() -> None:
    """Ask Linux for SIGTERM when the controller's process dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def main(argv: list[str] | None = None) -> None:
    url, transport, channel = (argv if argv is not None else sys.argv[1:])[:3]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    _die_with_parent()
    quiet_gc()
    # Timed when the bytes arrived: on a busy machine this process too waits for a core, and
    # what it waited would be counted as the server's latency.
    timestamps.switch_on(time.sleep)
    subscriber = TRANSPORTS[transport](Endpoint.parse(url), channel, PrintingSink(), stamped=True)
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        subscriber.run()


class ProbeProcess:
    """Controller side: starts the probe and books its deliveries per step."""

    def __init__(self, url: str, transport: str, channel: str, book: StepBook) -> None:
        self.book = book
        self.reconnects = 0
        self.subscribed = gevent.event.Event()
        self.proc = gevent.subprocess.Popen(
            [sys.executable, "-m", "pushserver_burnin.probe", url, transport, channel],
            stdout=gevent.subprocess.PIPE,
            stdin=gevent.subprocess.DEVNULL,
        )
        self.reader = gevent.spawn(self._read)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = orjson.loads(line)
            if "step" in event:
                counts = self.book.probe_step(event["step"])
                if event["dup"]:
                    counts.duplicates += 1
                else:
                    counts.delivered += 1
                    counts.e2e.add(event["e2e"])
                    counts.fanout.add(event["fanout"])
            elif "subscribed" in event:
                self.subscribed.set()
            elif "reconnect" in event:
                self.reconnects += 1

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except gevent.subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.kill()


if __name__ == "__main__":
    main()
