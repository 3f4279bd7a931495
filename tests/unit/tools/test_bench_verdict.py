"""Experiment 9's verdict on a row (`pushserver_bench.versus.judge`, `crowded`, `outpaced`,
`waited_on_client`) and the client processes' reports merged into one
(`pushserver_bench.pool.merge`)."""

from __future__ import annotations

from array import array
from typing import Any

from pushserver_bench.pool import merge
from pushserver_bench.versus import (
    SHARED,
    busiest,
    crowded,
    judge,
    outpaced,
    shared_core,
    waited_on_client,
)


def report(received: int, late: int, latencies: list[float]) -> dict[str, object]:
    return {
        "received": received,
        "expected": 10,
        "first": 1.0,
        "last": 2.0 + received,
        "latencies": latencies,
        "late": late,
        "errors": [],
        "cpu": 0.5,
    }


def test_a_row_is_the_servers_unless_a_delivery_was_lost_or_the_client_held_one() -> None:
    assert judge(0, []) == "valid"
    assert judge(0, [], "", late=0) == "valid"
    assert judge(0, [], late=3) == "INVALID: client-bound: 3 messages waited on a late re-poll"
    assert judge(2, ["boom"], "a client process used 95% of a core", late=1) == (
        "INVALID: 2 deliveries lost; boom; client-bound: a client process used 95% of a core; "
        "client-bound: 1 message waited on a late re-poll"
    )


def used(cpu: float) -> dict[str, Any]:
    """A client process's report: `cpu` seconds over the 10 s from the first publish."""
    return {"cpu": cpu, "first": 101.0, "last": 110.0, "errors": []}


def short(reports: list[dict[str, Any]], cpus: frozenset[int]) -> str:
    """`crowded` as experiment 9 calls it, from the first publish at 100.0."""
    together = merge(reports)
    return crowded(busiest(reports, 100.0), together["cpu"], together["last"] - 100.0, cpus)


def test_one_client_process_busy_for_most_of_a_core_crowds_the_row() -> None:
    reports = [used(2.0), used(9.5)]
    assert short(reports, frozenset()) == "a client process used 95% of a core"
    assert short([used(2.0), used(8.5)], frozenset()) == ""


def test_client_processes_kept_to_cpus_crowd_the_row_when_they_fill_them() -> None:
    four = [used(2.4)] * 4  # 96 % of one CPU together, 24 % of a core each
    assert short(four, frozenset()) == ""
    assert short(four, frozenset({1})) == (
        "the client processes used 96% of CPUs 1, all they were given"
    )
    assert short(four, frozenset({0, 1})) == ""  # 48 % of two


def test_the_crowd_of_a_timeout_row_is_judged_over_the_whole_row() -> None:
    """Experiment 10's crowd last receives the message that set it polling, seconds before the
    row ends: its share is taken over the wall time its caller gives."""
    assert crowded(0.3, 12.0, 12.5, frozenset({1})) == (
        "the client processes used 96% of CPUs 1, all they were given"
    )
    assert crowded(0.3, 12.0, 25.0, frozenset({1})) == ""


def test_merged_reports_sum_counts_and_keep_every_latency() -> None:
    merged = merge([report(10, 0, [0.1]), report(9, 2, [0.2, 0.3])])
    assert merged["received"] == 19 and merged["expected"] == 20 and merged["late"] == 2
    assert merged["latencies"] == [0.1, 0.2, 0.3] and merged["last"] == 12.0
    assert merged["cpu"] == 1.0


def crowd(spans: dict[float, list[float]], waits: list[float]) -> dict[str, Any]:
    """A client process's report as `waited_on_client` reads it: each timed message's first and
    last arrival there, and (send time, re-poll) pairs of messages published before a re-poll."""
    return {"spans": spans, "waits": array("d", waits)}


def test_a_message_waited_on_the_client_only_if_its_answering_began_before_the_poll() -> None:
    # Message 10.0 first arrived at 10.30 (in the other process); message 10.5 at 10.52.
    one = crowd({10.0: [10.35, 10.40], 10.5: [10.52, 10.70]}, [10.5, 10.51, 10.5, 10.60])
    other = crowd({10.0: [10.30, 10.45], 10.5: [10.55, 10.80]}, [10.0, 10.31, 10.5, 10.52])
    # 10.5 re-polled at 10.51: before the server began answering it, so the server's wait;
    # 10.5 at 10.60 and 10.0 at 10.31: after; 10.5 at exactly its first arrival: not after.
    assert waited_on_client([one, other]) == 2
    assert waited_on_client([one]) == 1  # alone, message 10.0's answering began at 10.35
    assert waited_on_client([crowd({1.0: [1.1, 1.2]}, [])]) == 0


def test_the_plain_client_is_judged_by_its_busiest_read_window() -> None:
    calm = {"runnable": (0.4, 100.0)}
    assert outpaced([calm, {"runnable": (0.899, 100.5)}]) == (0.899, "")
    share, why = outpaced([calm, {"runnable": (0.97, 100.5)}])
    assert share == 0.97
    assert why == (
        "a client process was running or waiting for a core 97% of the time it read the "
        "message sent at 00:01:40 UTC"
    )
    assert outpaced([{"runnable": (0.0, 0.0)}]) == (0.0, "")  # no window long enough to judge


def test_a_server_preempted_between_one_at_a_time_messages_shared_its_core() -> None:
    """Alone on its core, a server waits for each request and is almost never preempted; at
    `SHARED` preemptions per message or more another process ran there, and the row is not a
    core's own cost."""
    assert shared_core(0, 5000) == ""
    assert shared_core(int(SHARED * 5000) - 1, 5000) == ""
    reason = shared_core(int(SHARED * 5000), 5000)
    assert reason.startswith("shared a core: the server was preempted 0.10 times per message")
    assert shared_core(4900, 5000).startswith("shared a core: the server was preempted 0.98")
    assert shared_core(3, 0).startswith("shared a core: the server was preempted 3.00")
    assert judge(0, [], shared=reason) == f"INVALID: {reason}"
    assert judge(1, [], shared=reason) == f"INVALID: 1 deliveries lost; {reason}"
