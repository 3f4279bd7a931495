"""The trimmer on its own: glibc's free memory given back once it has grown past `TRIM_AT`."""

from __future__ import annotations

import pytest

from pushserver.monitor.process import rss_bytes
from pushserver.monitor.trim import TRIM_AT, Trimmer


def test_freed_heap_memory_is_given_back_once_it_passes_the_threshold() -> None:
    trimmer = Trimmer()
    if trimmer.libc is None:
        pytest.skip("not glibc: nothing to trim")
    trimmer.check()  # whatever the tests before left
    trims, returned = trimmer.trims, trimmer.returned
    # 64 MiB in 2 KiB buffers (the C allocator's heap, not Python's arenas); every 16th kept,
    # so the rest are holes the allocator cannot hand back by shrinking its heap.
    buffers = [bytearray(2048) for _ in range(32768)]
    pinned = buffers[::16]
    trimmer.check()
    assert trimmer.trims == trims  # nothing freed yet
    before = rss_bytes()
    del buffers
    assert trimmer.free() >= trimmer.floor + TRIM_AT
    trimmer.check()
    assert trimmer.trims == trims + 1
    assert before - rss_bytes() > 32 << 20 and trimmer.returned - returned > 32 << 20
    trimmer.check()
    assert trimmer.trims == trims + 1  # nothing freed since
    del pinned
