"""Process settings every load-generator process needs before it holds thousands of sockets."""

from __future__ import annotations

import gc
import resource


def raise_open_files_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard limit (20,000 here); returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1_048_576)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def quiet_gc() -> None:
    """Freeze what exists and make full collections rare.

    Cyclic-GC passes over tens of thousands of subscribers were the worst latency spikes
    measured (hundreds of ms); subscriber state makes few cycles, so memory stays flat.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 1000)
