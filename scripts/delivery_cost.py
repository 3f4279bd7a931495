"""What a long-poll delivery costs a server tree, counted rather than timed: the instructions a
process executes in user space (valgrind's callgrind) per delivery to a crowd of held plain
long-polls of one channel, as in experiment 9: a publish, its fan-out and settle pass, and every
poll's re-poll, read whole and held again by its kept poll. No sockets: each connection's
transport is a stand-in that keeps what is written, so the count is the server's Python (and
compiled code) alone, and a change to it is seen whatever the machine's load.

    .venv/bin/python scripts/delivery_cost.py TREE... [--held 1000] [--python PYTHON]

A TREE is a source tree (a `git worktree add --detach` of a commit) run through `PYTHONPATH`,
or `installed`: the package installed in PYTHON's environment, such as a compiled wheel's
(`PUSHSERVER_COMPILE=1 VENV/bin/pip install '.[bench]'`, then `--python VENV/bin/python`).
Per delivery = (count after 12 publishes - count after 2) / (10 x held): start-up, the polls'
first requests and the first publishes cancel out; each count runs with `PYTHONHASHSEED=0`, so
a build counts the same each time (within tens). The stand-in's `write` and `is_closing` are
Python: they add the same to every tree, and more than uvloop's would, so compare trees, not
these counts with a profile of the real server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

POLL = b"GET /lp/crowd?cursor=%s&timeout=60 HTTP/1.1\r\nHost: x\r\n\r\n"
FEW, MANY = 2, 12


class Transport:
    """Keeps the last thing written; never closing."""

    def __init__(self) -> None:
        self.out = b""

    def write(self, data: bytes) -> None:
        self.out = data

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.2", 5555) if name == "peername" else default

    def resume_reading(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass


def cursor_of(transport: Transport) -> bytes:
    return str(orjson.loads(transport.out.partition(b"\r\n\r\n")[2])["cursor"]).encode()


async def cycle(held: int, publishes: int) -> None:
    """`held` polls held, then `publishes` rounds of a publish and every poll's re-poll."""
    from pushserver.config import Settings
    from pushserver.web.app import create_app
    from pushserver.web.front.protocol import FrontProtocol
    from pushserver.web.server import listening_socket, start_serving
    from pushserver_bench.client import publish_request, ticker_data

    settings = Settings(port=0, max_flush_delay=0, max_connections=held + 100)
    serving = await start_serving(await create_app(settings), listening_socket(settings))
    publisher = FrontProtocol(serving.front)
    publisher.connection_made(Transport())  # type: ignore[arg-type]
    polls = []
    for _ in range(held):
        poll, transport = FrontProtocol(serving.front), Transport()
        poll.connection_made(transport)  # type: ignore[arg-type]
        poll.data_received(POLL % b"")
        polls.append((poll, transport))
    last = b""
    for raw in [publish_request("crowd", ticker_data()) for _ in range(publishes)]:
        publisher.data_received(raw)
        await asyncio.sleep(0)  # the flush
        await asyncio.sleep(0)  # the settle pass
        answer = polls[0][1].out
        if answer == last:
            raise SystemExit("the first poll was not answered with the message")
        last = answer
        again = POLL % cursor_of(polls[0][1])
        for poll, transport in polls:
            if transport.out != answer:  # every poll gets the one answer the fan-out built
                raise SystemExit(f"a poll was not answered with the message: {transport.out!r}")
            poll.data_received(again)


def count(tree: str, python: str, held: int, publishes: int, work: Path) -> int:
    """Instructions the harness runs with `publishes` publishes, under callgrind."""
    env = dict(os.environ, PYTHONHASHSEED="0")  # str hashes, and so dict probing, as in every run
    if tree != "installed":
        env["PYTHONPATH"] = str(Path(tree).resolve())
    out = work / f"cg.{publishes}"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        python,
        str(Path(__file__).resolve()),
        "--cycle",
        str(held),
        str(publishes),
    ]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the harness failed ({done.returncode}):\n{done.stderr[-2000:]}")
    summary = re.search(r"^summary: (\d+)$", out.read_text(), re.M)
    if summary is None:
        raise SystemExit(f"{tree}: callgrind wrote no summary in {out}")
    return int(summary[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", help="source trees, or `installed`")
    parser.add_argument("--held", type=int, default=1000, help="held long-polls (at least 1)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to run")
    parser.add_argument("--cycle", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cycle:
        import uvloop

        uvloop.run(cycle(*args.cycle))
        return
    if not args.trees:
        parser.error("name at least one tree (or `installed`)")
    if args.held < 1:
        parser.error("--held must be at least 1")
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install -y valgrind")
    for tree in args.trees:
        if tree != "installed" and not Path(tree, "pushserver").is_dir():
            parser.error(f"{tree} is not a source tree (no pushserver/ in it)")
        with tempfile.TemporaryDirectory() as work:
            few = count(tree, args.python, args.held, FEW, Path(work))
            many = count(tree, args.python, args.held, MANY, Path(work))
        per = (many - few) / ((MANY - FEW) * args.held)
        where = f"{tree} ({args.python})" if tree == "installed" else tree
        print(f"{where}: {per:,.0f} instructions per delivery ({args.held:,} held polls)")


if __name__ == "__main__":
    main()
