"""Compile the server's hot modules of a tree with mypyc, in place, for measuring what compiled
code would cost (docs/mypyc-study.md): each module's C extension is written beside its `.py`,
which it shadows on import, and one shared library (`*__mypyc*.so`) at the tree's root.

    .venv/bin/python scripts/mypyc_build.py TREE [MODULE.py ...]

The source carries the changes mypyc needs (docs/mypyc-study.md, "What adopting it takes");
without MODULE arguments, the modules a publish and a long-poll delivery run through (`HOT`).
The build runs mypy on them first (the tree's `pyproject.toml` settings) and stops on any error.
Remove the `.so` files to go back to the interpreted tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HOT = [
    "pushserver/web/front/base.py",
    "pushserver/web/front/bodies.py",
    "pushserver/web/front/repoll.py",
    "pushserver/web/front/connection.py",
    "pushserver/web/front/protocol.py",
    "pushserver/web/front/publish.py",
    "pushserver/web/front/wheel.py",
    "pushserver/web/front/routes.py",
    "pushserver/web/front/forward.py",
    "pushserver/web/http/answer.py",
    "pushserver/web/publishing.py",
    "pushserver/web/admission.py",
    "pushserver/web/auth.py",
    "pushserver/web/ratelimit.py",
    "pushserver/web/transports/longpoll.py",
    "pushserver/web/transports/held.py",
    "pushserver/web/transports/common.py",
    "pushserver/web/transports/exchange.py",
    "pushserver/core/hub.py",
    "pushserver/core/fanout.py",
    "pushserver/core/history.py",
    "pushserver/core/messages.py",
    "pushserver/core/positions.py",
    "pushserver/core/ages.py",
    "pushserver/core/channel.py",
    "pushserver/core/idempotency.py",
    "pushserver/core/subscription.py",
    "pushserver/broker/memory.py",
    "pushserver/broker/sinks.py",
    "pushserver/wire/framing.py",
]
"""Every module whose Python a publish (0 or 1 SSE subscriber) or a held long-poll's delivery
runs, by `scripts/publish_cost.py --opcodes`: compiled, a publish runs no Python opcode."""

SETUP = """
import os
from setuptools import setup
from mypyc.build import mypycify
modules = os.environ["HOT_MODULES"].split()
extensions = mypycify(modules, opt_level="3", target_dir=os.environ["HOT_TEMP"])
setup(name="hot", py_modules=[], ext_modules=extensions)
"""


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tree = Path(sys.argv[1]).resolve()
    modules = sys.argv[2:] or HOT
    with tempfile.TemporaryDirectory() as temp:
        setup = Path(temp, "setup.py")
        setup.write_text(SETUP)
        done = subprocess.run(
            [
                sys.executable,
                str(setup),
                "build_ext",
                "--inplace",
                *("--build-temp", temp, "--build-lib", temp),
            ],
            cwd=tree,
            env={**os.environ, "HOT_MODULES": " ".join(modules), "HOT_TEMP": temp},
        )
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
