"""The results file (docs/results-format.md): one JSON line per header, step and end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

RESULTS_NAME = "results.jsonl"
FORMAT = 1
TOOL = "pushserver-burnin"


class ResultsWriter:
    """Appends lines to DIR/results.jsonl; every line is flushed so a killed run keeps its steps."""

    def __init__(self, out_dir: str | Path) -> None:
        self.path = Path(out_dir) / RESULTS_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("ab") as out:
            out.write(orjson.dumps(record) + b"\n")


def read_run(path: Path, run_id: str) -> list[dict[str, Any]]:
    """The lines of one run from a results file (several runs may share a file)."""
    lines = []
    with path.open("rb") as source:
        for raw in source:
            if raw.strip():
                record = orjson.loads(raw)
                if record.get("run_id") == run_id:
                    lines.append(record)
    return lines
