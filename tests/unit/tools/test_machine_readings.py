"""The /proc readings the bench divides by: user and kernel seconds against the kernel's own
count of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from pushserver_measure.machine import preemptions, run_seconds, user_system_seconds

ROOT = Path(__file__).resolve().parents[3]


def _syscalls(seconds: float) -> None:
    """Spend `seconds` of this thread's CPU mostly in the kernel: reads of /dev/zero."""
    end = time.thread_time() + seconds
    fd = os.open("/dev/zero", os.O_RDONLY)
    try:
        while time.thread_time() < end:
            os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def _python(seconds: float) -> None:
    """Spend `seconds` of this thread's CPU in user space."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(1000))


def measure() -> None:
    """In a process of its own (no thread of a test runner's comes or goes meanwhile): two
    threads' work as `os.times()` and the /proc readings see it, printed as JSON."""
    spent, release = threading.Event(), threading.Event()

    def worker() -> None:
        _syscalls(0.3)
        spent.set()
        release.wait(10)

    pid = os.getpid()
    before, times, run = user_system_seconds([pid]), os.times(), run_seconds([pid])
    thread = threading.Thread(target=worker)
    thread.start()
    _syscalls(0.3)
    _python(0.3)
    assert spent.wait(10)
    low = os.times()
    after = user_system_seconds([pid])
    high = os.times()
    ran = run_seconds([pid]) - run
    release.set()
    thread.join()
    print(
        json.dumps(
            {
                "user": after[0] - before[0],
                "system": after[1] - before[1],
                "user_range": [low.user - times.user, high.user - times.user],
                "system_range": [low.system - times.system, high.system - times.system],
                "ran": ran,
            }
        )
    )


def test_user_and_system_seconds_sum_every_live_thread() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tests.unit.tools.test_machine_readings import measure; measure()",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    seen = json.loads(out)
    # The kernel splits each thread's run time into user and system from tick samples, and the
    # process's total from the group's samples, so the two may differ by a few ticks.
    slack = 10 / os.sysconf("SC_CLK_TCK")
    for name in ("user", "system"):
        low, high = seen[f"{name}_range"]
        assert low - slack <= seen[name] <= high + slack, seen
    assert seen["system"] > 0.2, seen  # two threads read /dev/zero for 0.3 s of CPU each
    assert seen["user"] > 0.2, seen  # the main thread's 0.3 s of CPU in Python
    assert seen["user"] + seen["system"] <= seen["ran"] + slack, seen


def test_a_gone_process_reads_as_nothing() -> None:
    assert user_system_seconds([2**22 + 7]) == (0, 0)


def test_preemptions_count_a_process_made_to_share_its_core() -> None:
    """Two busy processes kept to one CPU take it from each other, and their count of
    preemptions rises; a process gone reads as none."""
    cpu = min(os.sched_getaffinity(0))
    spin = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", spin], preexec_fn=lambda: os.sched_setaffinity(0, {cpu})
        )
        for _ in range(2)
    ]
    try:
        pids = [p.pid for p in procs]
        start = preemptions(pids)
        deadline = time.monotonic() + 20
        while preemptions(pids) - start < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert preemptions(pids) - start >= 20
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert preemptions([procs[0].pid]) == 0  # gone: nothing to read
