"""The layering of docs/architecture.md, checked: nothing under core/ or wire/ imports aiohttp,
and no package imports one above it (web -> broker, monitor -> core -> wire).

Imports are read from the source with `ast` (every import statement, also those inside
functions), and core and wire are also imported for real with aiohttp made unimportable, which
catches an aiohttp import reached through any other module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "pushserver"

RANK = {
    "": -1,
    "config": -1,
    "redis_urls": -2,
    "head_sizes": -2,
    "wire": 0,
    "core": 1,
    "broker": 2,
    "monitor": 2,
    "web": 3,
}
"""Layer of each package or top-level module; a module imports only from its own layer or a
lower one. The package's `__init__` and `config` are leaves every layer may read, and
`redis_urls` and `head_sizes` one below config, which reads `--redis` and checks the head
limits with them; a top-level module not named here
is an entry point (cli, runner, workers, ...), above everything."""
ENTRY = 4
NO_AIOHTTP = ("core", "wire")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports(module: str, source: str, known: set[str]) -> set[str]:
    """Full names of the modules `module` imports; `from pkg import name` counts as importing
    `pkg.name` when that is a module in `known`."""
    is_package = MODULES.get(module, Path()).name == "__init__.py"
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                stem = package[: len(package) - node.level + 1]
                base = ".".join([*stem, base] if base else stem)
            subs = {f"{base}.{a.name}" for a in node.names} & known
            found.update(subs or {base})
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else ""
    return name if name in RANK else "entry"


def rank(module: str) -> int:
    return RANK.get(layer(module), ENTRY)


def upward(module: str, source: str, known: set[str]) -> list[str]:
    """The imports of `module` that reach a layer above its own (or a sibling of the same rank)."""
    return sorted(
        target
        for target in imports(module, source, known)
        if target.split(".")[0] == "pushserver"
        and layer(target) != layer(module)
        and rank(target) >= rank(module)
    )


def test_the_rule_catches_upward_and_sideways_imports():
    known = set(MODULES) | {"pushserver.web.app", "pushserver.broker.memory"}
    source = textwrap.dedent(
        """
        from ..wire.framing import Framing
        from .errors import InvalidInput
        def late():
            from ..web import app
            import pushserver.broker.memory
        """
    )
    assert upward("pushserver.core.hub", source, known) == [
        "pushserver.broker.memory",
        "pushserver.web.app",
    ]
    assert upward("pushserver.broker.memory", "from ..monitor import metrics", known) == [
        "pushserver.monitor.metrics"
    ]
    leaves = "from .. import __version__\nfrom ..config import Settings"
    assert upward("pushserver.web.app", leaves, known) == []
    assert upward("pushserver.config", "from .core import errors", known) == [
        "pushserver.core.errors"
    ]
    assert upward("pushserver.wire.framing", "from pushserver.config import Settings", known) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_layer_above_its_own(module):
    assert upward(module, MODULES[module].read_text(), set(MODULES)) == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer(m) in NO_AIOHTTP))
def test_core_and_wire_sources_do_not_import_aiohttp(module):
    found = imports(module, MODULES[module].read_text(), set(MODULES))
    assert not {m for m in found if m.split(".")[0] == "aiohttp"}


BLOCKED_IMPORT = """
import importlib, importlib.abc, pkgutil, sys

class NoAiohttp(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "aiohttp":
            raise ImportError(f"{name} is blocked: core and wire must not need it")
        return None

sys.meta_path.insert(0, NoAiohttp())
for package in sys.argv[1:]:
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        importlib.import_module(info.name)
        print(info.name)
assert not [m for m in sys.modules if m.split(".")[0] == "aiohttp"]
"""


def test_core_and_wire_import_without_aiohttp():
    packages = [f"pushserver.{name}" for name in NO_AIOHTTP]
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_IMPORT, *packages],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    imported = set(done.stdout.split())
    assert imported == {m for m in MODULES if layer(m) in NO_AIOHTTP and m not in packages}


def test_the_blocker_really_blocks():
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_IMPORT, "pushserver.web"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0 and "aiohttp is blocked" in done.stderr
