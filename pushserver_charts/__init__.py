"""Charts and the HTML report of pushserver burn-in results (docs/charts.md)."""

from typing import Any, NoReturn

from pushserver_charts.results import (
    Latency,
    ResultsError,
    Run,
    Step,
    load_all,
    load_results,
    load_runs,
)
from pushserver_measure.extras import run

__all__ = [
    "Latency",
    "ResultsError",
    "Run",
    "Step",
    "build_report",
    "load_all",
    "load_results",
    "load_runs",
    "main",
    "write_report",
]


def main() -> NoReturn:
    """`pushserver-charts`; one line instead of a traceback when the charts extra is missing."""
    run("pushserver-charts", "pushserver_charts.cli", "charts", ("matplotlib",))


def __getattr__(name: str) -> Any:
    """The drawing functions, imported on first use: loading results needs no matplotlib."""
    if name in ("build_report", "write_report"):
        from pushserver_charts import report

        return getattr(report, name)
    raise AttributeError(f"module 'pushserver_charts' has no attribute {name!r}")
