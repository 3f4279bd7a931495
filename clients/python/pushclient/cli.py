"""`pushclient sub` prints a subscription line by line; `pushclient pub` publishes one message.

Exit status: 0 done, 1 error (one line on stderr), 2 usage, 130 interrupted (Ctrl-C), 143
terminated (SIGTERM); `sub` always ends by printing the last cursor on stderr so the user can
resume from it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from dataclasses import asdict

import orjson

from .backoff import Backoff
from .client import PushClient
from .errors import PushError
from .models import Gap, Message
from .transports import TRANSPORT_NAMES

KEY_ENV = "PUSHSERVER_PUBLISH_KEY"


class UsageError(Exception):
    """Bad input the user can fix; reported as one line."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser, commands = _parsers()
    if not argv or argv[0] not in commands:
        parser.parse_args(argv)  # prints help or the usage error, and exits
    # Intermixed, so options may follow the positionals: `pub URL CHANNEL --json '{...}'`.
    args = commands[argv[0]].parse_intermixed_args(argv[1:])
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="pushclient: %(message)s")
    # A shell starts `cmd &` with SIGINT ignored, and asyncio then leaves it so: restore
    # Ctrl-C whatever was inherited, so SIGINT stops the command as it does in the foreground.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return asyncio.run(args.command(args))
    except KeyboardInterrupt:
        return 130
    except asyncio.CancelledError:  # SIGTERM, see _sub
        return 143
    except BrokenPipeError:  # the reader went away (`pushclient sub ... | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (PushError, UsageError) as exc:
        print(f"pushclient: {exc}", file=sys.stderr)
        return 1


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="pushclient", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    sub = commands.add_parser("sub", help="print messages of channels until interrupted")
    sub.set_defaults(command=_sub)
    sub.add_argument("url", help="server URL, e.g. http://127.0.0.1:8080")
    sub.add_argument("channels", help="comma-separated channel names")
    sub.add_argument("--transport", choices=TRANSPORT_NAMES, default="sse")
    sub.add_argument("--cursor", help="resume after this cursor (printed by a previous run)")
    sub.add_argument("--history", type=int, default=0, help="first the last N buffered messages")
    sub.add_argument("--token", help="subscriber token (JWT) when the server requires one")
    sub.add_argument("--heartbeat", type=float, help="server heartbeat, s (default: /stats)")
    sub.add_argument("--max-retries", type=int, help="give up after N failed attempts in a row")
    sub.add_argument("--json", action="store_true", help="print each event as JSON")

    pub = commands.add_parser("pub", help="publish one message and print the receipt")
    pub.set_defaults(command=_pub)
    pub.add_argument("url", help="server URL, e.g. http://127.0.0.1:8080")
    pub.add_argument("channel")
    pub.add_argument("data", nargs="?", default="-", help="the message; - or nothing: stdin")
    pub.add_argument("--json", action="store_true", help="DATA is JSON (default: plain text)")

    for command in (sub, pub):
        command.add_argument(
            "--key", default=os.environ.get(KEY_ENV), help=f"publish key (default: ${KEY_ENV})"
        )
        command.add_argument("-v", "--verbose", action="store_true", help="log reconnects")
    return parser, {"sub": sub, "pub": pub}


async def _sub(args: argparse.Namespace) -> int:
    # SIGTERM ends the subscription like Ctrl-C does, so the cursor is still printed.
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    client = PushClient(
        args.url,
        publish_key=args.key,
        heartbeat=args.heartbeat,
        max_retries=args.max_retries,
        backoff=Backoff(maximum=10.0),
    )
    async with client:
        subscription = client.subscribe(
            args.channels.split(","),
            transport=args.transport,
            cursor=args.cursor,
            history=args.history,
            token=args.token,
        )
        await client.health()  # a wrong URL fails here, not in an endless retry loop
        try:
            async for item in subscription:
                print(_format(item, as_json=args.json), flush=True)
        finally:
            if subscription.cursor is not None:
                print(f"pushclient: resume with --cursor {subscription.cursor}", file=sys.stderr)
    return 0


async def _pub(args: argparse.Namespace) -> int:
    raw = sys.stdin.buffer.read().removesuffix(b"\n") if args.data == "-" else args.data.encode()
    try:
        text = raw.decode("utf-8")
        data = orjson.loads(raw) if args.json else text
    except UnicodeDecodeError as exc:
        raise UsageError(f"the message is not UTF-8 text: {exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"--json: the message is not valid JSON: {exc}") from exc
    async with PushClient(args.url, publish_key=args.key) as client:
        result = await client.publish(args.channel, data)
    print(orjson.dumps(asdict(result)).decode(), flush=True)
    return 0


def _format(item: Message | Gap, *, as_json: bool) -> str:
    if isinstance(item, Message):
        if as_json:
            return orjson.dumps(asdict(item)).decode()
        data = item.data if isinstance(item.data, str) else orjson.dumps(item.data).decode()
        return f"{item.channel} #{item.id} {data}"
    if as_json:
        gap = {"type": "gap", "channel": item.channel, "from": item.from_id, "to": item.to_id}
        return orjson.dumps({**gap, "reason": item.reason, "cursor": item.cursor}).decode()
    if item.to_id < item.from_id:
        return f"{item.channel} GAP ({item.reason}): history reset, nothing buffered was lost"
    return f"{item.channel} GAP ({item.reason}): lost #{item.from_id}..#{item.to_id}"
