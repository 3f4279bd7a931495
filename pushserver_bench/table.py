"""The tables the bench prints, in the shape of the original papers, and their JSON form."""

from __future__ import annotations

import dataclasses
from typing import Any

from .said import server_line


def cell(value: Any) -> str:
    if isinstance(value, float):
        if value == 0 or abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


@dataclasses.dataclass
class Table:
    """One printed table: header row, data rows, the settings it ran with and what was lost."""

    experiment: int
    title: str
    columns: list[str]
    rows: list[list[Any]] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    lost: int = 0
    errors: list[str] = dataclasses.field(default_factory=list)
    servers: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """What each pushserver measured said of its process (`said.server_said`); empty for a
    server that says nothing (nginx+nchan, the bare server)."""

    def __post_init__(self) -> None:
        self.columns = [*self.columns, "lost"]

    def add(self, *row: Any, lost: int = 0, errors: list[str] | None = None) -> None:
        """One row; `lost` (deliveries that never arrived) becomes its last column."""
        self.rows.append([*row, lost])
        self.lost += max(0, lost)
        self.errors.extend((errors or [])[:5])

    def render(self, machine: str, bench: str) -> str:
        """The table under its title, the machine, the bench's Python (`bench`) and the
        servers' own (`servers`)."""
        texts = [[cell(v) for v in row] for row in self.rows]
        widths = [
            max([len(c)] + [len(r[i]) for r in texts if i < len(r)])
            for i, c in enumerate(self.columns)
        ]
        line = "  ".join("-" * w for w in widths)
        out = [f"Experiment {self.experiment}: {self.title}", f"machine: {machine}"]
        out.append(f"bench: {bench}")
        out += [f"server: {server_line(said)}" for said in self.servers]
        out += [f"  {n}" for n in self.notes]
        out.append("  ".join(c.rjust(w) for c, w in zip(self.columns, widths, strict=True)))
        out.append(line)
        out += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=False)) for r in texts]
        status = "lost=0" if not self.lost and not self.errors else f"FAILED: lost={self.lost}"
        out.append(status)
        out += [f"  error: {e}" for e in self.errors]
        return "\n".join(out) + "\n"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
