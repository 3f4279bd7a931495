"""Cyclic GC settings and pause measurement.

The collector's full passes over tens of thousands of held connections paused trial servers for
hundreds of milliseconds. Long-lived start-up objects are frozen out of its reach, thresholds are
raised, and every pause is timed so `/metrics` shows what the GC costs.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

FLOOD = 4096
"""Channels held at a peak whose end calls for a full collection (`GcMonitor.drained`)."""


class GcMonitor:
    def __init__(self, observe: Callable[[int, float], None]) -> None:
        self._observe = observe
        self._started = 0.0
        self.peak = 0
        """The most channels held since the last full collection (`drained`)."""
        self.last = 0
        """The channels held when `drained` was last asked."""
        self.pauses = 0
        self.collected = 0
        """Objects the collector found unreachable: garbage only cycles could keep alive."""
        self.total = 0.0
        self.worst = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        self.pauses += 1
        self.collected += info["collected"]
        self.total += pause
        self.worst = max(self.worst, pause)
        self._observe(info["generation"], pause)

    def install(self, thresholds: tuple[int, int, int]) -> None:
        gc.set_threshold(*thresholds)
        gc.callbacks.append(self._callback)

    def drained(self, held: int) -> bool:
        """A full collection once a flood is over: the channels `held` at most a quarter of
        their peak since the last collection (a peak of at least `FLOOD`) and no longer
        falling. The raised thresholds never run one on an idle server, and a full one empties
        the interpreter's free lists (tuples, floats, lists, dicts, contexts), whose blocks,
        freed last as the flood's channels went, sit in its arenas and keep them resident
        (20-46 MB of a 192,000-channel flood on Redis). Run when little is held, it is short."""
        falling, self.last = held < self.last, held
        self.peak = max(self.peak, held)
        if self.peak < FLOOD or 4 * held > self.peak or falling:
            return False
        self.peak = held
        gc.collect()
        return True

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    @staticmethod
    def freeze() -> None:
        """Move everything alive now (modules, app, routes) out of the collector's scans."""
        gc.collect()
        gc.freeze()
