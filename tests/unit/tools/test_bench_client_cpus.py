"""`--client-cpus`: the CPU lists it takes, and what it refuses before anything starts."""

from __future__ import annotations

import os

import pytest

from pushserver_bench.cli import cpu_list, cpus_refusal


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("1", {1}), ("0,2", {0, 2}), ("1-3", {1, 2, 3}), ("0,2-3,5", {0, 2, 3, 5}), ("4-4", {4})],
)
def test_cpu_lists_as_taskset_takes_them(text: str, cpus: set[int]) -> None:
    assert cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["", "a", "1,", "-1", "3-1", "1-", "1.5", "0;1"])
def test_what_is_not_a_cpu_list(text: str) -> None:
    with pytest.raises(ValueError):
        cpu_list(text)
    assert "CPU list" in cpus_refusal(text)


def test_a_cpu_this_process_may_use_is_taken() -> None:
    usable = sorted(os.sched_getaffinity(0))
    assert cpus_refusal(str(usable[-1])) == ""
    assert cpus_refusal(",".join(map(str, usable))) == ""


def test_a_cpu_this_process_may_not_use_is_refused() -> None:
    beyond = max(os.sched_getaffinity(0)) + 1
    problem = cpus_refusal(f"{beyond}")
    assert problem.startswith(f"--client-cpus: CPU {beyond} is not one this process may use")
