"""`--fault STEP:COMMAND`: the operator's command (restart Redis, kill a node, fail over a
shard) run when a step starts publishing, and what it did to the deliveries around it.

The command runs in a shell beside the publisher, which keeps its rate whatever the command
does; the step line then records the command, its exit status and timing, the publish requests
that failed meanwhile, and the recovery time: from the command's start until deliveries flow
again, the first delivery (at any subscriber) of a message planned after the command started
and after the last message whose publish failed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import gevent
import gevent.subprocess

from pushserver_burnin.publisher import PublishResult

OUTPUT_KEPT = 300  # characters of the command's output kept in the step line


class FaultRun:
    """One fault command in progress."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.started = time.time()
        self.proc = gevent.subprocess.Popen(
            command,
            shell=True,
            stdin=gevent.subprocess.DEVNULL,
            stdout=gevent.subprocess.PIPE,
            stderr=gevent.subprocess.STDOUT,
        )
        self.output = b""
        self.ended: float | None = None
        self.reader = gevent.spawn(self._read)

    def _read(self) -> None:
        out, _ = self.proc.communicate()
        self.output = out or b""
        self.ended = time.time()

    def wait(self, timeout: float) -> None:
        """Wait for the command to end, at most `timeout` s (it may go on: it is the
        operator's, and its exit status is then recorded as null)."""
        self.reader.join(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.reader.kill()

    def record(
        self, result: PublishResult, rate: float, step: int, first: Mapping[tuple[int, int], float]
    ) -> dict[str, Any]:
        """The step line's `fault` object."""
        after = [seq for seq in range(result.ticks) if result.began + seq / rate >= self.started]
        since = max((seq for seq in result.failed if seq in after), default=-1)
        arrivals = [first[step, seq] for seq in after if seq > since and (step, seq) in first]
        text = self.output.decode("utf-8", "replace").strip()
        return {
            "command": self.command,
            "exit_status": self.proc.returncode if self.ended is not None else None,
            "started": self.started,
            "seconds": None if self.ended is None else self.ended - self.started,
            "output": text[-OUTPUT_KEPT:],
            "publish_errors": result.errors,
            "recovery_seconds": min(arrivals) - self.started if arrivals else None,
        }
