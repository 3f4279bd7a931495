"""Charts and the HTML report of pushserver burn-in results (docs/charts.md)."""

from typing import Any

from charts.results import Latency, ResultsError, Run, Step, load_all, load_results, load_runs

__all__ = [
    "Latency",
    "ResultsError",
    "Run",
    "Step",
    "build_report",
    "load_all",
    "load_results",
    "load_runs",
    "write_report",
]


def __getattr__(name: str) -> Any:
    """The drawing functions, imported on first use: loading results needs no matplotlib."""
    if name in ("build_report", "write_report"):
        from charts import report

        return getattr(report, name)
    raise AttributeError(f"module 'charts' has no attribute {name!r}")
