"""Every worker of the server under test, each one's `/stats` read on its own.

A `--workers N` server is N processes on one port (SO_REUSEPORT): a `/stats` request is answered
by whichever worker the kernel hands the connection to, and that worker knows only its own
memory, channels, connections and CPU. So one answer describes one worker, and its RSS over all
channels of the run reads N times too low. Each reading here asks over fresh connections (each
a new source port, so the kernel picks a worker afresh) until every worker has answered: on this
machine the workers are the processes listening on the port; elsewhere, until enough answers in
a row come from workers already heard.
"""

from __future__ import annotations

from typing import Any

import psutil

from pushserver_burnin.resources import LOOPBACK, fetch_stats
from pushserver_measure.http11 import Connection, Endpoint
from pushserver_measure.machine import listening_pids

ASKS_PER_WORKER = 24
"""Fresh connections per worker before a reading gives up on one that has not answered: with 3
workers, one is missed 72 times in a row with a chance of (2/3)**72, about 2e-13."""
SETTLED = 12
"""Answers in a row from workers already heard after which a server whose workers cannot be
counted here (not on this machine) is taken to have no other."""

Reading = dict[int, dict[str, Any]]
"""Each worker's `/stats`, by process id (0 for a server whose `/stats` names no pid)."""


def done(answers: Reading, listening: frozenset[int], repeats: int) -> bool:
    """Whether a reading has every worker: all listening ones when they are known, else
    SETTLED answers in a row that added none."""
    if listening:
        return listening <= answers.keys()
    return bool(answers) and repeats >= SETTLED


class ServerWorkers:
    """Reads `/stats` from every worker of the server at `endpoint`."""

    def __init__(self, endpoint: Endpoint, headers: dict[str, str]) -> None:
        self.endpoint = endpoint
        self.headers = headers
        self.local = endpoint.host in LOOPBACK
        self.listening: frozenset[int] = frozenset()
        """The worker processes, when the server runs on this machine."""

    def find(self) -> None:
        """Look up which processes listen on the server's port (a scan of every socket on the
        machine: done before the subscribers come, and again only if a worker was replaced)."""
        if self.local:
            try:
                self.listening = frozenset(listening_pids(self.endpoint.port))
            except psutil.Error:  # sockets of other processes not readable here: read until
                self.listening = frozenset()  # answers repeat, as for a remote server

    def read(self) -> Reading:
        """Every worker's `/stats`; fewer when some did not answer (the server is down, or a
        worker was missed ASKS_PER_WORKER times per worker in a row)."""
        answers: Reading = {}
        repeats, refound = 0, False
        for _ in range(ASKS_PER_WORKER * max(len(self.listening), 1) + SETTLED):
            stats = self._ask()
            if stats is None:
                break
            pid = stats.get("pid")
            pid = pid if isinstance(pid, int) else 0
            if pid in answers:
                repeats += 1
            else:
                answers[pid], repeats = stats, 0
                if self.listening and pid not in self.listening and not refound:
                    self.find()  # a worker was replaced since the last look
                    refound = True
            if done(answers, self.listening, repeats):
                break
        return answers

    def _ask(self) -> dict[str, Any] | None:
        conn = Connection(self.endpoint, timeout=10)
        try:
            return fetch_stats(conn, self.headers)
        finally:
            conn.close()
