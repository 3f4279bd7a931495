"""`pushserver-charts`: burn-in results files in, PNG/SVG charts and an HTML report out."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pushserver_charts.results import ResultsError, load_all

PROG = "pushserver-charts"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Chart pushserver-burnin results (JSON lines) as PNG and SVG files and one "
        "self-contained HTML report. Several files overlay on the same axes.",
    )
    parser.add_argument(
        "results", nargs="+", type=Path, metavar="RESULTS.jsonl", help="burn-in results file"
    )
    parser.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="DIR",
        help="output directory (default: the first results file's directory)",
    )
    parser.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="RUN_ID",
        help="chart only this run (repeatable; default: every run in the files)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = args.out or args.results[0].parent
    try:
        runs = load_all(args.results, args.run)
        for run in runs:
            for warning in run.warnings:
                print(f"{PROG}: warning: {warning}", file=sys.stderr)
        from pushserver_charts.report import (
            write_report,  # matplotlib loads once the input is known good
        )

        report = write_report(runs, out)
    except ResultsError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{PROG}: error: cannot write to {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
