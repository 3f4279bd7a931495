"""The `server:` line of a bench table: what a pushserver said of its process, the build too."""

from __future__ import annotations

import pytest

from pushserver_bench.said import server_line

INTERPRETER = {
    "implementation": "CPython",
    "version": "3.11.2",
    "executable": "/usr/bin/python3.11",
    "libpython": "static",
}
ALLOCATOR = {"python": "pymalloc", "c": "glibc 2.36"}


@pytest.mark.parametrize(("compiled", "end"), [(True, ", compiled"), (False, ", interpreted")])
def test_the_server_line_names_the_build_the_server_said(compiled: bool, end: str) -> None:
    said = {"interpreter": INTERPRETER, "allocator": ALLOCATOR, "compiled": compiled}
    assert server_line(said) == (
        "CPython 3.11.2 (/usr/bin/python3.11, libpython static), allocator pymalloc + glibc 2.36"
        + end
    )


def test_a_server_that_says_no_build_gets_none_named() -> None:
    line = server_line({"interpreter": INTERPRETER, "allocator": ALLOCATOR})
    assert not line.endswith(("compiled", "interpreted"))
