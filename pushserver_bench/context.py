"""What every experiment gets: the server to measure, the sizes to run at, the machine."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
from collections.abc import Iterator
from typing import Any

from pushserver.launcher import ServerProcess

from .bare import BareProcess
from .machine import SERVER_PIDS
from .said import server_said

_names = itertools.count(1)


@dataclasses.dataclass
class Bench:
    """`url` set: measure that running server; else each experiment starts its own."""

    machine: str
    quick: bool = False
    url: str = ""
    server_args: list[str] = dataclasses.field(default_factory=list)
    redis: str = ""
    processes: int = 2
    target: str = "pushserver"
    """What experiment 9 measures at `url` (or `pub_url`/`sub_url`): "pushserver", "nchan" or
    "bare" (`bare.py`, which the bench starts itself when no `url` is given)."""
    pub_url: str = ""
    sub_url: str = ""
    pids: list[int] = dataclasses.field(default_factory=list)
    """The measured server's processes; empty: found from the listening port."""
    subscribers: list[int] = dataclasses.field(default_factory=list)
    """Experiment 9's and 10's subscriber counts; empty: their defaults."""
    transports: list[str] = dataclasses.field(default_factory=list)
    """Experiment 9's transports under load; empty: long-poll and SSE."""
    client_cpus: frozenset[int] = frozenset()
    """The CPUs the tuned client's processes may run on; empty: any."""
    clients: list[str] = dataclasses.field(default_factory=list)
    """Experiment 9's measuring clients, `tuned` and/or `plain` (`versus.CLIENTS`); empty:
    both."""
    per_process: int = 5000
    encode_cursor: bool = False
    """Experiment 9: pushserver's long-poll cursor sent percent-encoded (`encodeURIComponent`)."""
    compressed: bool = False
    """Experiment 9: subscribers ask for gzip and inflate it; every load publishes
    `ticker_data` (realistic quotes), so a run without it compares on the same messages."""
    """Experiments 9 and 10: subscribers per client process at most."""
    said: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """What each distinct pushserver measured since it was last cleared said of its process
    (`said.server_said`): the `server:` lines of an experiment's tables."""

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    @contextlib.contextmanager
    def server(self, *args: str) -> Iterator[str]:
        """A server to measure: the `--url` one, or a fresh one started with `args` (the bare
        server for that target)."""
        if self.url:
            self.hear(self.url)
            yield self.url
            return
        launch = (
            BareProcess() if self.target == "bare" else ServerProcess([*self.server_args, *args])
        )
        with launch as srv:
            assert srv.proc is not None
            SERVER_PIDS[srv.url] = srv.proc.pid
            self.hear(srv.url)
            try:
                yield srv.url
            finally:
                del SERVER_PIDS[srv.url]

    def hear(self, url: str) -> None:
        """Keep what the pushserver at `url` says of its process; nginx+nchan and the bare
        server are not asked."""
        said = server_said(url) if self.target == "pushserver" else {}
        if said and said not in self.said:
            self.said.append(said)

    @property
    def launches(self) -> bool:
        """Whether the bench starts servers itself (needed to vary their settings)."""
        return not self.url


def channel(prefix: str) -> str:
    """A channel no other run has used, so no history leaks between measurements."""
    return f"bench-{prefix}-{os.getpid()}-{next(_names)}"
