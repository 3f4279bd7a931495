"""The /proc readings the bench divides by: kernel seconds against the kernel's own count."""

from __future__ import annotations

import os
import threading
import time

from pushserver_measure.machine import kernel_seconds, run_seconds


def _syscalls(seconds: float) -> None:
    """Spend CPU mostly in the kernel: reads of /dev/zero."""
    end = time.monotonic() + seconds
    fd = os.open("/dev/zero", os.O_RDONLY)
    try:
        while time.monotonic() < end:
            os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def test_kernel_seconds_sums_every_live_thread() -> None:
    tick = 1 / os.sysconf("SC_CLK_TCK")
    spent, release = threading.Event(), threading.Event()

    def worker() -> None:
        _syscalls(0.3)
        spent.set()
        release.wait(10)

    pid = os.getpid()
    # Differences over the test: os.times() also counts threads that ended before it.
    kernel, system, run = kernel_seconds([pid]), os.times().system, run_seconds([pid])
    thread = threading.Thread(target=worker)
    thread.start()
    try:
        _syscalls(0.3)
        assert spent.wait(10)
        low = os.times().system - system
        reading = kernel_seconds([pid]) - kernel
        high = os.times().system - system
        ran = run_seconds([pid]) - run
    finally:
        release.set()
        thread.join()
    assert low - 2 * tick <= reading <= high + 2 * tick
    assert reading > 0.2  # both threads read /dev/zero for 0.3 s each, mostly in the kernel
    assert reading <= ran + 2 * tick


def test_a_gone_process_reads_as_nothing() -> None:
    assert kernel_seconds([2**22 + 7]) == 0
