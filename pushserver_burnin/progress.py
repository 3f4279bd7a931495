"""The one-line summary of a step printed on the terminal."""

from __future__ import annotations

from typing import Any


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f} ms"


def _waited(figures: dict[str, Any]) -> str:
    wait = figures.get("cpu_wait_percent")
    return "" if wait is None else f" (+{wait:.0f}% waiting for a CPU)"


def _server(figures: dict[str, Any]) -> str:
    """CPU and memory of the server: of its busiest worker and of all of them when several
    answered, RSS of all together."""
    rss = int(figures["rss_bytes"] or 0) >> 20
    cpu = f"cpu {figures['cpu_percent']:.0f}%{_waited(figures)}"
    workers = figures.get("workers") or 1
    if workers == 1:
        return f"{cpu} rss {rss} MiB"
    together = figures.get("cpu_percent_total") or 0.0
    return f"{workers} workers: busiest {cpu}, all {together:.0f}%, rss of all {rss} MiB"


def progress_line(record: dict[str, Any]) -> str:
    e2e, fanout = record["latency"]["e2e"], record["latency"]["fanout"]
    text = (
        f"step {record['step']}: {record['subscribers']} subscribers, {record['channels']} "
        f"channels, {record['messages']} msgs, delivered {record['delivered']}/"
        f"{record['expected']} lost {record['lost']} dup {record['duplicates']} "
        f"reconnects {record['reconnects']} | e2e worst {_ms(e2e['worst'])} p99 {_ms(e2e['p99'])}"
        f" | fan-out p99 {_ms(fanout['p99'])}"
    )
    if record["probe"]:
        text += f" | probe e2e worst {_ms(record['probe']['e2e']['worst'])}"
    server, loadgen = record["server"], record["loadgen"]
    if server["cpu_percent"] is not None:
        text += f" | server {_server(server)}"
    if loadgen["cpu_percent"] is not None:
        text += f" | loadgen cpu {loadgen['cpu_percent']:.0f}%{_waited(loadgen)}"
        if loadgen["cpu_us_per_delivery"] is not None:
            text += f", {loadgen['cpu_us_per_delivery']:.0f} us CPU per delivery"
    if loadgen["saturated"]:
        text += " (SATURATED: this step measures the load generator)"
    if record.get("side"):
        text += f" | {record['side']}"
    if record["invalid"]:
        text += f" | INVALID: {record['invalid']}"
    return text
