"""Compile the server's hot modules of a tree with mypyc, in place, for measuring what compiled
code costs (docs/mypyc-study.md): each module's C extension is written beside its `.py`, which
it shadows on import, and one shared library (`pushserver__mypyc*.so`) at the tree's root.

    .venv/bin/python scripts/mypyc_build.py TREE [MODULE.py ...]

Without MODULE arguments, the modules of the compiled build (TREE's `pyproject.toml`,
`[tool.hatch.build.targets.wheel.hooks.custom]`; a tree from before it needs them named), at
this checkout's optimisation level, compiled by this checkout's `hatch_build.py`: the same
extensions `PUSHSERVER_COMPILE=1 pip install .` puts in its wheel, for a tree run through
`PYTHONPATH`. The build runs mypy on them first (the tree's settings) and stops on any error.
Remove the `.so` files to go back to the interpreted tree.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hatch_build import compile_modules

ROOT = Path(__file__).resolve().parents[1]


def hooks(project: dict[str, Any]) -> dict[str, Any]:
    """The compiled build's table of a `pyproject.toml`, empty when it has none."""
    wheel = project.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {})
    return dict(wheel.get("wheel", {}).get("hooks", {}).get("custom", {}))


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tree = Path(sys.argv[1]).resolve()
    here = tomllib.loads((ROOT / "pyproject.toml").read_text())
    there = tomllib.loads((tree / "pyproject.toml").read_text())
    hook = hooks(here)
    modules = sys.argv[2:] or hooks(there).get("modules")
    if not modules:
        sys.exit(f"{tree}/pyproject.toml names no compiled modules: give them as arguments")
    with tempfile.TemporaryDirectory() as out:
        lib = compile_modules(str(tree), modules, hook["opt-level"], out)
        for path in lib.rglob("*.so"):
            shutil.copy2(path, tree / path.relative_to(lib))


if __name__ == "__main__":
    main()
