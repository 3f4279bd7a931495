"""The opt-in compiled build: with `PUSHSERVER_COMPILE=1`, `pip install .` and `pip wheel .`
compile the hot path with mypyc into the wheel (docs/operations.md, "The compiled build").

The modules and the optimisation level are the hook's table in `pyproject.toml`
(`[tool.hatch.build.targets.wheel.hooks.custom]`), the one list of them. Everything is built in a
temporary directory and only the wheel carries the extension modules: nothing is written into the
checkout, where a `.so` would shadow an edited `.py`. Without the variable the hook asks for
nothing and the wheel stays pure Python.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SWITCH = "PUSHSERVER_COMPILE"
TOOLS = ["mypy==2.4.1", "setuptools==84.2.1"]
"""What compiling needs besides the runtime dependencies, which mypy reads the types of."""


def wanted() -> bool:
    return os.environ.get(SWITCH, "") not in ("", "0")


class CompiledBuild(BuildHookInterface):
    """Adds the hot modules' extension modules (and mypyc's shared library) to the wheel."""

    def dependencies(self) -> list[str]:
        return [*TOOLS, *self.metadata.core.dependencies] if wanted() else []

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if not wanted():
            return
        if version == "editable":
            raise RuntimeError(
                f"{SWITCH}=1 builds a wheel; an editable install runs the checkout's .py files"
            )
        self.out = tempfile.mkdtemp(prefix="pushserver-compile-")
        try:
            lib = compile_modules(
                self.root, self.config["modules"], self.config["opt-level"], self.out
            )
        except BaseException:
            shutil.rmtree(self.out)
            raise
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        build_data["force_include"].update(
            {str(path): path.relative_to(lib).as_posix() for path in sorted(lib.rglob("*.so"))}
        )

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if wanted() and version != "editable":
            shutil.rmtree(self.out)


def compile_modules(root: str, modules: list[str], opt_level: str, out: str) -> Path:
    """Compile `modules` (paths under `root`) into `out`; returns the folder whose tree of
    extension files mirrors the packages'."""
    from mypyc.build import mypycify
    from setuptools import Distribution

    lib = Path(out, "lib")
    # mypy's cache goes with the rest, out of the checkout
    os.environ["MYPY_CACHE_DIR"] = os.path.join(out, "mypy")
    with contextlib.chdir(root):
        extensions = mypycify(
            modules, opt_level=opt_level, target_dir=os.path.join(out, "c"), group_name="pushserver"
        )
        dist = Distribution({"name": "pushserver-compiled", "ext_modules": extensions})
        build = dist.get_command_obj("build_ext")
        build.build_lib = str(lib)
        build.build_temp = os.path.join(out, "temp")
        dist.run_command("build_ext")
    return lib
