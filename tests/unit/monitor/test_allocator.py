"""Which allocators a process reports (`/stats` `allocator`), and jemalloc's decay asked for by
the trimmer giving freed memory back, in a process that runs on it."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from pushserver.monitor.allocator import (
    Jemalloc,
    c_allocator,
    jemalloc_library,
    missing,
    python_allocator,
)


def test_this_process_runs_on_what_it_was_started_with(monkeypatch: pytest.MonkeyPatch) -> None:
    assert python_allocator() == (os.environ.get("PYTHONMALLOC") or "pymalloc")
    monkeypatch.setenv("PYTHONMALLOC", "malloc")
    assert python_allocator() == "malloc"
    monkeypatch.delenv("PYTHONMALLOC")
    assert python_allocator() == "pymalloc"
    if "LD_PRELOAD" not in os.environ:
        assert Jemalloc.running() is None
        assert c_allocator().startswith(("glibc ", "libc"))


def test_a_missing_jemalloc_is_told_only_when_it_is_wanted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    glibc = "glibc 2.36"
    assert missing("pymalloc", glibc) == ""
    assert bool(missing("jemalloc", glibc)) == (not jemalloc_library())
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)  # a machine without it
    jemalloc_library.cache_clear()  # looked up once per process: this is another machine
    try:
        assert jemalloc_library() == ""
        assert "jemalloc is not installed" in missing("jemalloc", glibc)
        assert missing("pymalloc", glibc) == ""
        assert missing("jemalloc", "jemalloc 5.3.0") == ""  # preloaded from where it was
    finally:
        jemalloc_library.cache_clear()


HOLD_AND_FREE = textwrap.dedent(
    """
    import json, time
    from pushserver.monitor.process import rss_bytes
    from pushserver.monitor.trim import Trimmer
    trimmer = Trimmer()
    base = rss_bytes()
    buffers = [bytearray(2048) for _ in range(32768)]  # 64 MiB from malloc
    pinned = buffers[::16]  # holes, not a heap that shrinks from its top
    held = rss_bytes()
    del buffers
    deadline = time.monotonic() + 60
    while rss_bytes() > held - (32 << 20) and time.monotonic() < deadline:
        trimmer.check()
        time.sleep(0.2)
    print(json.dumps({"allocator": trimmer.allocator, "base": base, "held": held,
                      "after": rss_bytes(), "glibc": trimmer.libc is not None}))
    """
)


def test_on_jemalloc_the_trimmer_gives_freed_memory_back_through_its_decay() -> None:
    library = jemalloc_library()
    if not library:
        pytest.skip("jemalloc is not installed")
    env = {**os.environ, "PYTHONMALLOC": "malloc", "LD_PRELOAD": library}
    done = subprocess.run(
        [sys.executable, "-c", HOLD_AND_FREE], env=env, capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["allocator"]["python"] == "malloc"
    assert got["allocator"]["c"].startswith("jemalloc ")
    assert not got["glibc"]  # glibc's heap is not where the memory is: no trims of it
    assert got["held"] - got["base"] > 64 << 20
    assert got["held"] - got["after"] > 32 << 20, got
