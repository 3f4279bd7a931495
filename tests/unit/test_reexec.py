"""When the `pushserver` command replaces its interpreter with one on jemalloc, and when it
leaves the allocator as it was started (`pushserver.reexec.environment`); and that a start
looks for jemalloc (a subprocess) once at most, across that replacement."""

from __future__ import annotations

import ctypes.util
import os
from collections.abc import Callable, Iterator

import pytest

from pushserver import cli, reexec
from pushserver.monitor.allocator import jemalloc_library, missing, wanted
from pushserver.reexec import OPERATORS, environment

LIBRARY = "libjemalloc.so.2"
PATH = {"PATH": "/usr/bin"}


def installed() -> str:
    return LIBRARY


def not_asked() -> str:
    raise AssertionError("jemalloc looked for where the rest decides")


def test_auto_with_jemalloc_installed_serves_on_it_with_every_object_from_malloc() -> None:
    assert environment("jemalloc", PATH, installed) == {
        "PATH": "/usr/bin",
        "PYTHONMALLOC": "malloc",
        "LD_PRELOAD": LIBRARY,
    }


@pytest.mark.parametrize(
    "operators",
    [
        {"PYTHONMALLOC": "pymalloc"},
        {"PYTHONMALLOC": "malloc"},  # also what the replaced interpreter sees: no second turn
        {"LD_PRELOAD": "/opt/lib/libtcmalloc.so"},
    ],
)
def test_what_the_operator_chose_is_kept(operators: dict[str, str]) -> None:
    assert environment("jemalloc", {**PATH, **operators}, not_asked) is None


def test_an_empty_variable_is_no_choice() -> None:
    assert environment("jemalloc", {**PATH, "PYTHONMALLOC": "", "LD_PRELOAD": ""}, installed) == {
        **PATH,
        "PYTHONMALLOC": "malloc",
        "LD_PRELOAD": LIBRARY,
    }


def test_pymalloc_wanted_or_no_jemalloc_serves_as_started() -> None:
    assert environment("pymalloc", PATH, not_asked) is None
    assert environment("jemalloc", PATH, lambda: "") is None


@pytest.mark.parametrize(
    ("setting", "redis", "allocator"),
    [
        ("auto", True, "jemalloc"),  # a flood's arenas stay on Python's own with Redis
        ("auto", False, "pymalloc"),  # 0.14 KB less per held subscriber, memory back either way
        ("jemalloc", False, "jemalloc"),
        ("jemalloc", True, "jemalloc"),
        ("pymalloc", True, "pymalloc"),
        ("pymalloc", False, "pymalloc"),
    ],
)
def test_auto_wants_jemalloc_on_the_redis_broker_alone(
    setting: str, redis: bool, allocator: str
) -> None:
    assert wanted(setting, redis) == allocator


class Start:
    """One `pushserver` start's allocator decisions, made by the code that makes them: the
    command's (`cli.serve_on_jemalloc`), then, when it replaced itself, the same command's in
    the replaced process (a new process: nothing remembered, the environment it was given,
    on jemalloc when that preloaded it), then its ready server's warning
    (`allocator.missing`). `ctypes.util.find_library` counts its calls in `lookups`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, found: str | None) -> None:
        self.monkeypatch = monkeypatch
        self.found = found
        self.lookups: list[str] = []
        self.replaced: list[dict[str, str]] = []
        monkeypatch.setattr(ctypes.util, "find_library", self.find_library)
        monkeypatch.setattr(reexec, "replace", self.replaced.append)  # the execve
        jemalloc_library.cache_clear()  # what this test process looked up is not this start's

    def find_library(self, name: str) -> str | None:
        self.lookups.append(name)
        return self.found

    def run(self, setting: str, redis: bool) -> str:
        """The start; the warning its server logs ("" for none)."""
        chosen = wanted(setting, redis)
        cli.serve_on_jemalloc(chosen)
        if self.replaced:
            jemalloc_library.cache_clear()
            for name in OPERATORS:
                self.monkeypatch.setenv(name, self.replaced[-1][name])
            cli.serve_on_jemalloc(chosen)
        preloaded = os.environ.get("LD_PRELOAD") == LIBRARY
        return missing(chosen, "jemalloc 5.3.0" if preloaded else "glibc 2.36")


@pytest.fixture
def start(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str | None], Start]]:
    """`start(found)`: a `Start` on a machine where the lookup finds `found`, in an
    environment without the operator's variables (unless the test sets them after)."""
    for name in OPERATORS:
        monkeypatch.delenv(name, raising=False)
    yield lambda found: Start(monkeypatch, found)
    jemalloc_library.cache_clear()


@pytest.mark.parametrize(("setting", "redis"), [("auto", True), ("jemalloc", False)])
def test_a_start_on_jemalloc_looks_for_it_once_across_the_replacement(
    start: Callable[[str | None], Start], setting: str, redis: bool
) -> None:
    run = start(LIBRARY)
    assert run.run(setting, redis) == ""
    assert run.lookups == ["jemalloc"]  # the command's; the replaced process knows its answer
    assert [(env["PYTHONMALLOC"], env["LD_PRELOAD"]) for env in run.replaced] == [
        ("malloc", LIBRARY)
    ]


def test_without_jemalloc_a_start_looks_once_and_warns(
    start: Callable[[str | None], Start],
) -> None:
    run = start(None)
    assert "jemalloc is not installed" in run.run("auto", True)
    assert (run.lookups, run.replaced) == (["jemalloc"], [])


@pytest.mark.parametrize(
    ("operators", "lookups"),
    [
        ({"PYTHONMALLOC": "pymalloc"}, ["jemalloc"]),  # only for the warning, once
        ({"LD_PRELOAD": LIBRARY}, []),  # on jemalloc already: nothing to look for
    ],
)
def test_a_start_the_operator_chose_for_looks_once_at_most(
    start: Callable[[str | None], Start],
    monkeypatch: pytest.MonkeyPatch,
    operators: dict[str, str],
    lookups: list[str],
) -> None:
    run = start(LIBRARY)
    for name, value in operators.items():
        monkeypatch.setenv(name, value)
    assert run.run("auto", True) == ""
    assert (run.lookups, run.replaced) == (lookups, [])


def test_a_start_on_python_s_own_allocator_never_looks(
    start: Callable[[str | None], Start],
) -> None:
    run = start(LIBRARY)
    assert run.run("auto", False) == ""
    assert (run.lookups, run.replaced) == ([], [])
