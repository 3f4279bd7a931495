"""The /proc readings the bench divides by: user and kernel seconds against the kernel's own
count of them."""

from __future__ import annotations

import os
import threading
import time

from pushserver_measure.machine import run_seconds, user_system_seconds


def _syscalls(seconds: float) -> None:
    """Spend CPU mostly in the kernel: reads of /dev/zero."""
    end = time.monotonic() + seconds
    fd = os.open("/dev/zero", os.O_RDONLY)
    try:
        while time.monotonic() < end:
            os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def _python(seconds: float) -> None:
    """Spend CPU in user space."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))


def test_user_and_system_seconds_sum_every_live_thread() -> None:
    tick = 1 / os.sysconf("SC_CLK_TCK")
    spent, release = threading.Event(), threading.Event()

    def worker() -> None:
        _syscalls(0.3)
        spent.set()
        release.wait(10)

    pid = os.getpid()
    # Differences over the test: os.times() also counts threads that ended before it.
    (user, system), times, run = user_system_seconds([pid]), os.times(), run_seconds([pid])
    thread = threading.Thread(target=worker)
    thread.start()
    try:
        _syscalls(0.3)
        _python(0.3)
        assert spent.wait(10)
        low = os.times()
        after = user_system_seconds([pid])
        high = os.times()
        ran = run_seconds([pid]) - run
    finally:
        release.set()
        thread.join()
    user, system = after[0] - user, after[1] - system
    assert low.system - times.system - 2 * tick <= system <= high.system - times.system + 2 * tick
    assert low.user - times.user - 2 * tick <= user <= high.user - times.user + 2 * tick
    assert system > 0.2  # both threads read /dev/zero for 0.3 s each, mostly in the kernel
    assert user > 0.2  # the main thread's 0.3 s of Python
    assert user + system <= ran + 4 * tick


def test_a_gone_process_reads_as_nothing() -> None:
    assert user_system_seconds([2**22 + 7]) == (0, 0)
