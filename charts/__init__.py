"""Charts and the HTML report of pushserver burn-in results (docs/charts.md)."""

from charts.report import build_report, write_report
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
