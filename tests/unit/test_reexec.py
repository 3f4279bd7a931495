"""When the `pushserver` command replaces its interpreter with one on jemalloc, and when it
leaves the allocator as it was started (`pushserver.reexec.environment`)."""

from __future__ import annotations

import pytest

from pushserver.monitor.allocator import wanted
from pushserver.reexec import environment

LIBRARY = "libjemalloc.so.2"
PATH = {"PATH": "/usr/bin"}


def test_auto_with_jemalloc_installed_serves_on_it_with_every_object_from_malloc() -> None:
    assert environment("jemalloc", PATH, LIBRARY) == {
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
    assert environment("jemalloc", {**PATH, **operators}, LIBRARY) is None


def test_an_empty_variable_is_no_choice() -> None:
    assert environment("jemalloc", {**PATH, "PYTHONMALLOC": "", "LD_PRELOAD": ""}, LIBRARY) == {
        **PATH,
        "PYTHONMALLOC": "malloc",
        "LD_PRELOAD": LIBRARY,
    }


def test_pymalloc_wanted_or_no_jemalloc_serves_as_started() -> None:
    assert environment("pymalloc", PATH, LIBRARY) is None
    assert environment("jemalloc", PATH, "") is None


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
