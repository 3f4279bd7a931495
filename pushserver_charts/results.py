"""Load and check burn-in results files (the JSON-lines format of docs/results-format.md).

Every problem becomes one `ResultsError` naming the file and line, so the command line can print
a single clear message instead of a traceback. An interrupted run (no end line, maybe a truncated
last line) is still usable: its finished steps load and the run carries a warning.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeGuard

from pushserver_measure.verdict import STOPPED_BY, Point, verdict

TOOL = "pushserver-burnin"
FORMAT = 1
LEGS = ("publish", "fanout", "e2e")
PROBE_LEGS = ("fanout", "e2e")
SATURATION_PERCENT = 90


class ResultsError(Exception):
    """A results file that cannot be charted; the message names the file (and line)."""


@dataclass(frozen=True)
class Latency:
    """One latency leg of one step, in seconds; NaN where the step had no sample."""

    worst: float
    p50: float
    p90: float
    p99: float
    mean: float
    count: int
    p999: float = math.nan  # missing in files written before it was recorded


NO_LATENCY = Latency(math.nan, math.nan, math.nan, math.nan, math.nan, 0)


@dataclass(frozen=True)
class Window:
    """End-to-end latency of the deliveries that arrived in one second (seconds)."""

    second: float  # epoch
    count: int
    p50: float
    p90: float
    p99: float
    p999: float
    worst: float


@dataclass(frozen=True)
class Step:
    """One finished step; missing optional figures are NaN so plots leave a gap."""

    number: int
    subscribers: int
    channels: int
    messages: int
    expected: int
    delivered: int
    lost: int
    duplicates: int
    latency: dict[str, Latency]
    probe: dict[str, Latency] | None
    server_cpu: float
    server_rss: float
    loadgen_cpu: float
    saturated: bool
    ceiling: float
    point: Point  # what the verdict reads
    invalid: str = ""  # why the step measured nothing trustworthy ("" when valid)
    server_connections: float = math.nan  # held by all the server's workers together
    server_channels: float = math.nan  # channels all its workers hold together
    windows: tuple[Window, ...] = ()  # e2e latency per second of arrival
    fault: dict[str, Any] | None = None  # the --fault command run in this step
    started: float = math.nan  # epoch s

    @property
    def held(self) -> float:
        """Subscribers in the server process whose RSS the step records: with several server
        workers only that worker's connections, else every subscriber."""
        if math.isfinite(self.server_connections) and self.server_connections > 0:
            return self.server_connections
        return float(self.subscribers)


@dataclass(frozen=True)
class Run:
    """One burn-in run: its header (empty when the file has none), steps and end line."""

    path: Path
    run_id: str
    label: str
    header: dict[str, Any]
    steps: list[Step]
    end: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)

    def _field(self, name: str) -> str:
        return str(self.header.get(name) or "")

    @property
    def test(self) -> str:
        return self._field("test")

    @property
    def transport(self) -> str:
        return self._field("transport")

    @property
    def host(self) -> str:
        return self._field("host")

    @property
    def settings(self) -> dict[str, Any]:
        return self.header.get("settings") or {}

    @property
    def machine(self) -> dict[str, Any]:
        return self.header.get("machine") or {}

    @property
    def ceiling(self) -> float:
        """The latency ceiling in seconds, from the settings or else the steps."""
        value = self.settings.get("ceiling")
        if is_number(value):
            return float(value)
        return next((s.ceiling for s in self.steps if math.isfinite(s.ceiling)), math.nan)

    @property
    def idle(self) -> dict[str, Any]:
        """The server before the run's first subscriber (`server_idle` in the header)."""
        return self.header.get("server_idle") or {}

    @property
    def fresh(self) -> bool | None:
        """Whether the server had served nothing before the run (None: not recorded). A
        server that had keeps memory from before that it reuses, so its growth reads low."""
        idle = self.idle
        if "messages_in" not in idle:
            return None
        return not idle.get("messages_in") and not idle.get("channels")

    def idle_figure(self, key: str) -> float:
        value = self.idle.get(key)
        return float(value) if is_number(value) else 0.0

    @property
    def capacity(self) -> tuple[int, bool] | None:
        """The largest count whose every step stayed under the ceiling, and whether it is a
        capacity (the ceiling was passed after it) or only a lower bound; None: no valid step
        under the ceiling."""
        under: list[int] = []
        for step in self.steps:
            if step.invalid:
                break
            if not step.latency["e2e"].worst <= self.ceiling:
                return (max(under), True) if under else None
            under.append(step.subscribers)
        return (max(under), False) if under else None

    @property
    def idle_rss(self) -> float:
        """The server's RSS with no subscriber: from the header, else the intercept of a line
        through the valid steps' (subscribers, RSS), else 0."""
        recorded = self.idle.get("rss_bytes")
        if is_number(recorded):
            return float(recorded)
        points = [
            (s.subscribers, s.server_rss)
            for s in self.steps
            if not s.invalid and s.subscribers and math.isfinite(s.server_rss)
        ]
        if len({n for n, _ in points}) < 2:
            return 0.0
        mean_n = sum(n for n, _ in points) / len(points)
        mean_r = sum(r for _, r in points) / len(points)
        slope = sum((n - mean_n) * (r - mean_r) for n, r in points) / sum(
            (n - mean_n) ** 2 for n, _ in points
        )
        return max(0.0, mean_r - slope * mean_n)

    @property
    def stopped_early(self) -> str:
        """Why a run that never reached its ceiling stopped ("" when it did reach it)."""
        reason = self.end.get("reason") if self.end else "interrupted"
        return STOPPED_BY.get(str(reason), "")

    @property
    def verdict(self) -> str:
        """The run's answer in words (pushserver_measure.verdict), as the run printed it."""
        reason = self.end.get("reason") if self.end else None
        return verdict([step.point for step in self.steps], self.ceiling, reason)


def is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Line:
    """One parsed line, so field errors can name where they came from."""

    def __init__(self, where: str, obj: dict[str, Any]) -> None:
        self.where = where
        self.obj = obj

    def fail(self, message: str) -> ResultsError:
        return ResultsError(f"{self.where}: {message}")

    def number(self, obj: dict[str, Any], key: str, *, required: bool = False) -> float:
        value = obj.get(key)
        if value is None:
            if required:
                raise self.fail(f"step line lacks the field {key!r}")
            return math.nan
        if not is_number(value):
            raise self.fail(f"field {key!r} must be a number, got {json.dumps(value)}")
        return float(value)

    def count(self, obj: dict[str, Any], key: str, *, required: bool = False) -> int:
        value = self.number(obj, key, required=required)
        return int(value) if math.isfinite(value) else 0

    def section(self, obj: dict[str, Any], key: str) -> dict[str, Any]:
        value = obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(f"field {key!r} must be an object, got {json.dumps(value)}")
        return value

    def latency(self, obj: dict[str, Any], legs: Iterable[str]) -> dict[str, Latency]:
        parsed = {}
        for leg in legs:
            figures = self.section(obj, leg)
            parsed[leg] = (
                Latency(
                    worst=self.number(figures, "worst"),
                    p50=self.number(figures, "p50"),
                    p90=self.number(figures, "p90"),
                    p99=self.number(figures, "p99"),
                    mean=self.number(figures, "mean"),
                    count=self.count(figures, "count"),
                    p999=self.number(figures, "p999"),
                )
                if figures
                else NO_LATENCY
            )
        return parsed

    def step(self) -> Step:
        obj = self.obj
        if not isinstance(obj.get("latency"), dict):
            raise self.fail("step line lacks the 'latency' object")
        expected = self.count(obj, "expected", required=True)
        delivered = self.count(obj, "delivered", required=True)
        lost = obj.get("lost")
        probe = self.section(obj, "probe")
        loadgen = self.section(obj, "loadgen")
        server = self.section(obj, "server")
        loadgen_cpu = self.number(loadgen, "cpu_percent")
        saturated = loadgen.get("saturated")
        return Step(
            number=self.count(obj, "step", required=True),
            subscribers=self.count(obj, "subscribers", required=True),
            channels=self.count(obj, "channels"),
            messages=self.count(obj, "messages"),
            expected=expected,
            delivered=delivered,
            lost=self.count(obj, "lost") if lost is not None else max(expected - delivered, 0),
            duplicates=self.count(obj, "duplicates"),
            latency=self.latency(obj["latency"], LEGS),
            probe=self.latency(probe, PROBE_LEGS) if probe else None,
            server_cpu=self.number(server, "cpu_percent"),
            server_rss=self.number(server, "rss_bytes"),
            loadgen_cpu=loadgen_cpu,
            saturated=bool(saturated)
            if saturated is not None
            else loadgen_cpu >= SATURATION_PERCENT,
            ceiling=self.number(obj, "ceiling"),
            point=Point.from_line(obj),
            invalid=str(obj.get("invalid") or ""),
            server_connections=self.number(server, "connections"),
            server_channels=self.number(server, "channels"),
            windows=self.windows(obj.get("windows")),
            fault=self.section(obj, "fault") or None,
            started=self.number(obj, "started"),
        )

    def windows(self, rows: Any) -> tuple[Window, ...]:
        """The `windows` rows, NaN for a missing figure; a malformed row rejects the file."""
        if not isinstance(rows, list | None) or any(
            not isinstance(row, list) or len(row) != 7 for row in rows or []
        ):
            raise self.fail("field 'windows' must be a list of 7-item rows")
        rows = [[float(v) if is_number(v) else math.nan for v in row] for row in rows or []]
        return tuple(
            Window(second, int(count) if math.isfinite(count) else 0, *rest)
            for second, count, *rest in rows
        )


def _read_lines(path: Path) -> tuple[list[tuple[int, str]], bool]:
    """Non-blank (line number, text) pairs, and whether the last one lacks its newline."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ResultsError(f"{path}: not a text file, so not burn-in results") from None
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    if not lines:
        raise ResultsError(f"{path}: empty file, no burn-in results in it")
    return lines, not text.endswith("\n")


@dataclass
class _Draft:
    run_id: str
    header: dict[str, Any]
    steps: list[Step] = field(default_factory=list)
    end: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


def _parse(path: Path) -> list[_Draft]:
    lines, unterminated = _read_lines(path)
    drafts: list[_Draft] = []
    for n, text in lines:
        where = f"{path}:{n}"
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            if n == lines[-1][0] and unterminated and drafts:
                drafts[-1].warnings.append(f"{where}: truncated last line ignored")
                break
            problem = f"not JSON ({exc.msg}, column {exc.colno})"
            if not drafts:  # the very first line: most likely another tool's file
                problem = f"not a {TOOL} results file: {problem}"
            raise ResultsError(f"{where}: {problem}") from None
        if not isinstance(obj, dict) or "kind" not in obj:
            raise ResultsError(f'{where}: not a {TOOL} results file (no "kind" field)')
        line = _Line(where, obj)
        current = drafts[-1] if drafts else None
        kind = obj["kind"]
        run_id = str(obj.get("run_id") or "")
        if kind == "run":
            if obj.get("tool") != TOOL:
                tool = json.dumps(obj.get("tool"))
                raise line.fail(f"not a {TOOL} results file (its tool is {tool})")
            if obj.get("format", FORMAT) != FORMAT:
                raise line.fail(f"results format {json.dumps(obj['format'])} is not {FORMAT}")
            drafts.append(_Draft(run_id, obj))
        elif kind == "step":
            if (
                current is None
                or current.end is not None
                or (run_id and current.run_id and run_id != current.run_id)
            ):
                current = _Draft(run_id, {})
                drafts.append(current)
            current.run_id = current.run_id or run_id
            if not current.header:
                current.header = {k: obj[k] for k in ("test", "transport", "label") if k in obj}
            current.steps.append(line.step())
        elif kind == "end":
            if current is None:
                raise line.fail("end line before any run or step line")
            current.end = obj
        else:
            raise line.fail(f"unknown kind {json.dumps(kind)} (expected run, step or end)")
    return drafts


def load_runs(path: Path) -> list[Run]:
    """Every run in one results file (reruns into the same directory append to it)."""
    path = Path(path)
    runs = []
    for index, draft in enumerate(_parse(path), 1):
        run_id = draft.run_id or f"#{index}"
        if not draft.steps:
            continue
        if draft.end is None:
            draft.warnings.append(
                f"{path}: run {run_id} has no end line (interrupted?); "
                f"charting its {len(draft.steps)} finished steps"
            )
        header = draft.header
        default_label = "/".join(str(header[k]) for k in ("test", "transport") if header.get(k))
        runs.append(
            Run(
                path=path,
                run_id=run_id,
                label=str(header.get("label") or default_label or path.stem),
                header=header,
                steps=draft.steps,
                end=draft.end,
                warnings=draft.warnings,
            )
        )
    if not runs:
        raise ResultsError(f"{path}: no finished steps to chart")
    return runs


def load_results(path: Path) -> Run:
    """The one run in a results file; `ResultsError` if it holds none or several."""
    runs = load_runs(path)
    if len(runs) > 1:
        ids = ", ".join(run.run_id for run in runs)
        raise ResultsError(f"{path}: holds {len(runs)} runs ({ids}); load them with load_runs")
    return runs[0]


def load_all(paths: Iterable[Path], run_ids: Collection[str] = ()) -> list[Run]:
    """The runs of several files (only those in `run_ids` when given), with legend labels made
    distinct where they clash."""
    paths = [Path(path) for path in paths]
    runs = [run for path in paths for run in load_runs(path)]
    if run_ids:
        missing = set(run_ids) - {run.run_id for run in runs}
        if missing:
            names = ", ".join(sorted(missing))
            raise ResultsError(f"no run {names} in {', '.join(map(str, paths))}")
        runs = [run for run in runs if run.run_id in run_ids]
    namers = (
        lambda run: run.path.name,
        lambda run: str(run.path),
        lambda run: f"{run.path} run {run.run_id}",
    )
    labels = [run.label for run in runs]
    for namer in namers:
        clashes = {label for label, n in Counter(labels).items() if n > 1}
        if not clashes:
            break
        labels = [
            f"{run.label} ({namer(run)})" if label in clashes else label
            for run, label in zip(runs, labels, strict=True)
        ]
    return [replace(run, label=label) for run, label in zip(runs, labels, strict=True)]
