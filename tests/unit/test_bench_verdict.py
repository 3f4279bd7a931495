"""Experiment 9's verdict on a row (`pushserver_bench.versus.judge`) and the client processes'
reports merged into one (`pushserver_bench.pool.merge`)."""

from __future__ import annotations

from pushserver_bench.pool import merge
from pushserver_bench.versus import judge


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
    assert judge(0, [], 0.5) == "valid"
    assert judge(0, [], 0.5, late=0) == "valid"
    assert judge(0, [], 0.5, late=3) == "INVALID: client-bound: 3 messages waited on a late re-poll"
    assert judge(2, ["boom"], 0.95, late=1) == (
        "INVALID: 2 deliveries lost; boom; client-bound: a client process used 95% of a core; "
        "client-bound: 1 message waited on a late re-poll"
    )


def test_merged_reports_sum_counts_and_keep_every_latency() -> None:
    merged = merge([report(10, 0, [0.1]), report(9, 2, [0.2, 0.3])])
    assert merged["received"] == 19 and merged["expected"] == 20 and merged["late"] == 2
    assert merged["latencies"] == [0.1, 0.2, 0.3] and merged["last"] == 12.0
    assert merged["cpu"] == 1.0
