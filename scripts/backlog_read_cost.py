"""What a long-poll behind costs the server: a channel of 20,000 messages published in
`POST /pub` batches of 100, then polls whose cursor is K messages back, each answered at once
from the history (at most `--longpoll-max-messages`, 100). The server's front end is fed
through in-memory transports (no sockets, no client), so the time is the server's alone.

The tree measured is the one on `PYTHONPATH`; run it from outside a checkout (`$CO`) so that
no other `pushserver` is found first:

    cd /tmp && PYTHONPATH=TREE $CO/.venv/bin/python $CO/scripts/backlog_read_cost.py 1000 500
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import orjson
import uvloop

from pushserver.config import Settings
from pushserver.web.app import create_app
from pushserver.web.front.protocol import FrontProtocol
from pushserver.web.server import listening_socket, start_serving

MESSAGES = 20_000
BATCH = 100


class Transport(asyncio.Transport):
    """Keeps what the server writes; never pushes back."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[bytes] = []

    def write(self, data: Any) -> None:
        self.out.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default

    def get_write_buffer_size(self) -> int:
        return 0

    def body(self) -> Any:
        return orjson.loads(self.out[-1].partition(b"\r\n\r\n")[2])


def batch(start: int) -> bytes:
    items = [{"channel": "bl", "data": {"n": start + i, "p": "x" * 80}} for i in range(BATCH)]
    body = orjson.dumps(items)
    head = b"POST /pub HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    return head + b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


async def main(back: int, polls: int) -> None:
    settings = Settings(port=0, max_flush_delay=0, history_size=MESSAGES)
    serving = await start_serving(await create_app(settings), listening_socket(settings))
    publisher, published = FrontProtocol(serving.front), Transport()
    publisher.connection_made(published)
    for start in range(0, MESSAGES, BATCH):
        publisher.data_received(batch(start))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    poller, answered = FrontProtocol(serving.front), Transport()
    poller.connection_made(answered)
    poller.data_received(b"GET /lp/bl?history=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.sleep(0)
    name, epoch, last = answered.body()["cursor"].rsplit(":", 2)
    request = b"GET /lp/bl?cursor=%s HTTP/1.1\r\nHost: x\r\n\r\n" % (
        f"{name}:{epoch}:{int(last) - back}".encode()
    )
    started = time.perf_counter()
    for _ in range(polls):
        answered.out.clear()
        poller.data_received(request)
        await asyncio.sleep(0)
    spent = time.perf_counter() - started
    got = len(answered.body()["messages"])
    print(f"{back} behind: {spent / polls * 1e6:.1f} us per poll, {got} messages in the answer")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("back", type=int, help="how many messages behind the cursor is")
    parser.add_argument("polls", type=int, help="polls timed")
    args = parser.parse_args()
    uvloop.run(main(args.back, args.polls))
