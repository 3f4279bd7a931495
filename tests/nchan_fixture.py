"""nginx+nchan started with exactly the `nchan.conf` of docs/performance.md (its listen line
moved to a free port), for the bench's experiments against it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pushserver_measure.ports import free_port

from .nginx import Nginx
from .system import ensure_file

__all__ = ["Nginx", "documented_conf", "nchan_fixture"]

DOC = Path(__file__).parent.parent / "docs" / "performance.md"
DOC_LISTEN = "listen 127.0.0.1:8090;"
NCHAN_MODULE = Path("/usr/lib/nginx/modules/ngx_nchan_module.so")


def documented_conf(port: int) -> str:
    """The one nginx block of docs/performance.md, listening on `port`."""
    blocks = re.findall(r"```nginx\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1, "docs/performance.md must hold exactly one nginx block"
    assert blocks[0].count(DOC_LISTEN) == 1
    return blocks[0].replace(DOC_LISTEN, f"listen 127.0.0.1:{port};")


@pytest.fixture(name="nchan")
def nchan_fixture(tmp_path: Path) -> Iterator[Nginx]:
    ensure_file(NCHAN_MODULE, "libnginx-mod-nchan")
    port = free_port()
    nginx = Nginx(tmp_path / "nchan", documented_conf(port), port)
    yield nginx
    nginx.stop()
