"""Experiment 3: one broadcaster, 10 listeners, as fast as it can go. Listeners on the
broadcaster's channel vs on other channels: the server filters per channel, so listeners
elsewhere should cost nothing."""

from __future__ import annotations

from .client import TRANSPORTS
from .context import Bench, channel
from .fanout import fan_out
from .table import Table

LISTENERS = 10


async def run(bench: Bench) -> list[Table]:
    broadcasts = bench.size(5000, 20)
    table = Table(
        3,
        "broadcast: 1 broadcaster, 10 listeners",
        [
            "transport",
            "listeners on",
            "broadcasts",
            "ms per broadcast",
            "server CPU %",
            "client CPU s",
            "received",
        ],
    )
    table.notes.append(
        "one POST /pub/{channel} per broadcast, sent back to back on one connection; "
        "100-byte messages; listeners in client processes; server CPU % over the publishing time"
    )
    with bench.server() as url:
        for transport in TRANSPORTS:
            for same in (True, False):
                target = channel("bc")
                listen = (
                    [target] * LISTENERS if same else [channel("other") for _ in range(LISTENERS)]
                )
                r = await fan_out(
                    bench,
                    url,
                    transport,
                    target,
                    listen,
                    broadcasts,
                    expect=broadcasts if same else 0,
                )
                publishing = r["published"] - r["start"]
                table.add(
                    transport,
                    "its channel" if same else "other channels",
                    broadcasts,
                    1000 * publishing / broadcasts,
                    100 * r["server_cpu_publishing"] / publishing,
                    r["client_cpu"],
                    r["received"],
                    lost=r["lost"] + (r["received"] if not same else 0),
                    errors=r["errors"],
                )
    return [table]
