"""Compile the server's hot modules of a tree with mypyc, in place, for measuring what compiled
code costs (docs/mypyc-study.md): each module's C extension is written beside its `.py`, which
it shadows on import, and one shared library (`pushserver__mypyc*.so`) at the tree's root.

    .venv/bin/python scripts/mypyc_build.py TREE [MODULE.py ...]

Without MODULE arguments, the modules and optimisation level of the compiled build (TREE's
`pyproject.toml`, `[tool.hatch.build.targets.wheel.hooks.custom]`), compiled by the build's own
`hatch_build.py`: the same extensions `PUSHSERVER_COMPILE=1 pip install .` puts in its wheel, for
a tree run through `PYTHONPATH`. The build runs mypy on them first (the tree's settings) and stops
on any error. Remove the `.so` files to go back to the interpreted tree.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hatch_build import compile_modules


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tree = Path(sys.argv[1]).resolve()
    project = tomllib.loads((tree / "pyproject.toml").read_text())
    hook = project["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["custom"]
    modules = sys.argv[2:] or hook["modules"]
    with tempfile.TemporaryDirectory() as out:
        lib = compile_modules(str(tree), modules, hook["opt-level"], out)
        for path in lib.rglob("*.so"):
            shutil.copy2(path, tree / path.relative_to(lib))


if __name__ == "__main__":
    main()
