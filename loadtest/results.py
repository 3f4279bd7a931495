"""The results file (docs/results-format.md): one JSON line per header, step and end."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import orjson
import psutil

RESULTS_NAME = "results.jsonl"
FORMAT = 1
TOOL = "pushserver-burnin"


def machine_info() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_bytes": psutil.virtual_memory().total,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


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
