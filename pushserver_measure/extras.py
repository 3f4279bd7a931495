"""Console scripts whose dependencies are an optional extra: a missing one is a one-line answer
naming the install command, never a traceback.

Imports only the standard library, so it works in an install without any extra."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

INSTALL = "pip install 'pushserver[{extra}]' (from a clone: pip install '.[{extra}]')"


def run(prog: str, module: str, extra: str, provides: Sequence[str]) -> NoReturn:
    """Exit with `module`'s `main()`, or with 2 and one line when a top-level module that the
    extra `extra` provides (`provides`) is missing."""
    missing = [name for name in provides if importlib.util.find_spec(name) is None]
    if missing:
        names = ", ".join(missing)
        print(f"{prog}: needs {names}, not installed: {install_hint(extra)}", file=sys.stderr)
        sys.exit(2)
    main: Callable[[], int | None] = importlib.import_module(module).main
    sys.exit(main())


def install_hint(extra: str) -> str:
    return INSTALL.format(extra=extra)
