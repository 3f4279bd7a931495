"""Write the charts (PNG and SVG) and one self-contained HTML report about them.

The HTML embeds every chart as a data URI and carries its own CSS, so the one file can be mailed
or attached to a ticket and still show everything: charts, each run's settings and machine, and a
table of every step.
"""

from __future__ import annotations

import base64
import io
import logging
import math
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from pushserver_charts.figures import CHARTS
from pushserver_charts.layout import DPI, MIB, MS
from pushserver_charts.memory import per_channel_kib, per_subscriber_kib
from pushserver_charts.results import Run, Step, load_all

REPORT_NAME = "report.html"
log = logging.getLogger(__name__)

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; padding: 1.5em 2em 3em;
       max-width: 1300px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; } h3 { font-size: 1.05em; }
figure { margin: 1.5em 0; } img { max-width: 100%; height: auto; border: 1px solid #ddd; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; vertical-align: top; }
th { background: #f0f0f0; } td.text, th.text { text-align: left; }
code { font: 12px/1.4 ui-monospace, monospace; white-space: pre-wrap; word-break: break-all; }
tr.saturated { background: #fff3cd; } tr.invalid { background: #eee; color: #777; }
td.over { color: #b00; font-weight: bold; } p.verdict { font-size: 1.1em; }
td.lost { color: #b00; } .warn { color: #8a4b00; } figcaption { color: #555; max-width: 75em; }
"""


def _cell(value: Any, css: str = "") -> str:
    attr = f' class="{css}"' if css else ""
    return f"<td{attr}>{escape(str(value))}</td>"


def _num(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}" if math.isfinite(value) else "-"


def _when(epoch: Any) -> str:
    if isinstance(epoch, int | float):
        return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return ""


def _pretty(key: str, value: Any) -> str:
    if key.endswith("bytes") and isinstance(value, int | float):
        for unit, size in (("GiB", 1024**3), ("MiB", MIB), ("KiB", 1024)):
            if value >= size:
                return f"{value / size:,.1f} {unit}"
    return _flat(value)


def _flat(value: Any) -> str:
    """Lists and objects in settings, shown compactly; 1.0 as 1, as it was typed."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={_flat(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_flat(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _key_values(title: str, mapping: dict[str, Any]) -> str:
    if not mapping:
        return ""
    rows = "".join(
        f"<tr>{_cell(key, 'text')}{_cell(_pretty(key, value), 'text')}</tr>"
        for key, value in mapping.items()
    )
    return f'<h3>{escape(title)}</h3><div class="scroll"><table>{rows}</table></div>'


STEP_COLUMNS = (
    "step",
    "subscribers",
    "channels",
    "messages",
    "expected",
    "delivered",
    "lost",
    "dups",
    "publish p50 ms",
    "publish worst ms",
    "fan-out p50 ms",
    "fan-out worst ms",
    "e2e p50 ms",
    "e2e p90 ms",
    "e2e p99 ms",
    "e2e p99.9 ms",
    "e2e worst ms",
    "probe e2e worst ms",
    "server CPU %",
    "server RSS MiB",
    "RSS KiB/sub over baseline",
    "load-gen CPU %",
    "saturated",
    "fault: command, exit, recovery s",
    "invalid",
)


def _fault(step: Step) -> str:
    fault = step.fault
    if not fault:
        return ""
    recovery = fault.get("recovery_seconds")
    return (
        f"{fault.get('command')}; exit {fault.get('exit_status')}; recovered in "
        + (f"{recovery:.2f} s" if isinstance(recovery, int | float) else "- (no delivery after it)")
        + f"; {fault.get('publish_errors', 0)} publish errors"
    )


def _step_row(step: Step, run: Run, per_subscriber: float) -> str:
    e2e, fanout, publish = step.latency["e2e"], step.latency["fanout"], step.latency["publish"]
    probe = step.probe["e2e"].worst if step.probe else math.nan
    ceiling = run.ceiling
    over = "over" if math.isfinite(ceiling) and e2e.worst > ceiling else ""
    cells = [
        _cell(step.number),
        _cell(f"{step.subscribers:,}"),
        _cell(f"{step.channels:,}"),
        _cell(f"{step.messages:,}"),
        _cell(f"{step.expected:,}"),
        _cell(f"{step.delivered:,}"),
        _cell(f"{step.lost:,}", "lost" if step.lost else ""),
        _cell(f"{step.duplicates:,}", "lost" if step.duplicates else ""),
        _cell(_num(publish.p50 * MS)),
        _cell(_num(publish.worst * MS)),
        _cell(_num(fanout.p50 * MS)),
        _cell(_num(fanout.worst * MS)),
        _cell(_num(e2e.p50 * MS)),
        _cell(_num(e2e.p90 * MS)),
        _cell(_num(e2e.p99 * MS)),
        _cell(_num(e2e.p999 * MS)),
        _cell(_num(e2e.worst * MS), over),
        _cell(_num(probe * MS)),
        _cell(_num(step.server_cpu)),
        _cell(_num(step.server_rss / MIB)),
        _cell(_num(per_subscriber)),
        _cell(_num(step.loadgen_cpu)),
        _cell("yes" if step.saturated else ""),
        _cell(_fault(step), "text"),
        _cell(step.invalid, "text"),
    ]
    css = ' class="invalid"' if step.invalid else ' class="saturated"' if step.saturated else ""
    return f'<tr{css} data-step="{step.number}">{"".join(cells)}</tr>'


def _held(run: Run) -> str:
    """The headline: the most subscribers of a step whose worst latency stayed under the ceiling."""
    under = [
        step for step in run.steps if not step.invalid and step.latency["e2e"].worst <= run.ceiling
    ]
    if not under:
        return ""
    best = max(under, key=lambda step: step.subscribers)
    saturated = " (load generator saturated)" if best.saturated else ""
    return (
        f"{best.subscribers:,} subscribers, worst {_num(best.latency['e2e'].worst * MS)} ms "
        f"(step {best.number}){saturated}"
    )


def _memory(run: Run) -> str:
    """What the memory figures mean for this run: a stale server, and in the channels test
    the cost per channel with the history each holds."""
    notes = []
    if run.fresh is False:
        notes.append(
            "the server was not fresh (it had published or held channels before the run): "
            "memory it kept from before is reused, so the per-subscriber figures read low"
        )
    last = next((s for s in reversed(run.steps) if not s.invalid), None)
    if run.test == "channels" and last is not None:
        per_channel = per_channel_kib(run)[run.steps.index(last)]
        history = run.idle.get("history_size") or run.settings.get("history_size")
        rounds = sum(s.messages // max(s.channels, 1) for s in run.steps if not s.invalid)
        held = f"up to {min(int(history), rounds)}" if history else f"up to {rounds}"
        notes.append(
            f"{_num(per_channel)} KiB per channel at {last.subscribers:,} channels, each "
            f"holding {held} messages of history (--history-size {history or 'unknown'})"
        )
    return "; ".join(notes)


def _run_section(index: int, run: Run) -> str:
    end = run.end or {}
    summary = {
        "file": str(run.path),
        "run id": run.run_id,
        "test": run.test,
        "transport": run.transport,
        "server": run.host,
        "started": _when(run.header.get("started")),
        "steps": len(run.steps),
        "verdict": run.verdict,
        "held under the ceiling": _held(run),
        "memory": _memory(run),
        "ended": f"{end.get('reason', '')}: {end.get('message', '')}" if end else "interrupted",
    }
    header = "".join(f"<th>{escape(name)}</th>" for name in STEP_COLUMNS)
    rows = "".join(
        _step_row(step, run, kib)
        for step, kib in zip(run.steps, per_subscriber_kib(run), strict=True)
    )
    warnings = "".join(f'<p class="warn">{escape(w)}</p>' for w in run.warnings)
    command = run.header.get("command")
    typed = f"<h3>Command</h3><p><code>{escape(str(command))}</code></p>" if command else ""
    return (
        f'<section id="run-{index}"><h2>Run {index}: {escape(run.label)}</h2>{warnings}{typed}'
        + _key_values("Run", {k: v for k, v in summary.items() if v != ""})
        + _key_values("Settings", run.settings)
        + _key_values("Machine", run.machine)
        + f'<h3>Steps</h3><div class="scroll"><table class="steps"><tr>{header}</tr>{rows}'
        + "</table></div></section>"
    )


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def write_report(runs: Sequence[Run], out_dir: Path) -> Path:
    """Save every chart as PNG and SVG in `out_dir` and the HTML report beside them."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = []
    measured = any(not step.invalid for run in runs for step in run.steps)
    if not measured:
        figures.append("<p>No charts: every step is invalid, so nothing was measured.</p>")
    for spec in CHARTS if measured else ():
        if not spec.applies(runs):
            continue
        figure = spec.build(runs)
        png = _png(figure)
        (out_dir / f"{spec.name}.png").write_bytes(png)
        figure.savefig(out_dir / f"{spec.name}.svg", format="svg")
        data = base64.b64encode(png).decode("ascii")
        figures.append(
            f'<figure id="{spec.name}"><h2>{escape(spec.title)}</h2>'
            f'<img alt="{escape(spec.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{escape(spec.caption)}</figcaption></figure>"
        )
    labels = ", ".join(run.label for run in runs)
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Burn-in report: {escape(labels)}</title><style>{CSS}</style></head><body>"
        f"<h1>Burn-in report: {escape(labels)}</h1>"
        + "".join(
            f'<p class="verdict"><b>{escape(run.label)}</b>: {escape(run.verdict)}</p>'
            for run in runs
        )
        + "".join(figures)
        + "".join(_run_section(i, run) for i, run in enumerate(runs, 1))
        + "</body></html>\n"
    )
    report = out_dir / REPORT_NAME
    report.write_text(page, encoding="utf-8")
    return report


def build_report(paths: Iterable[Path], out_dir: Path, run_ids: Collection[str] = ()) -> Path:
    """Chart the given results files into `out_dir`; returns the HTML report's path.

    Every run of every file is charted, or only those in `run_ids` (a results file collects
    every run written to its directory). Raises `ResultsError` for a file that cannot be
    charted; warnings about interrupted runs go to this module's logger.
    """
    runs = load_all(paths, run_ids)
    for run in runs:
        for warning in run.warnings:
            log.warning("%s", warning)
    return write_report(runs, out_dir)
