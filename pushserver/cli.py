"""`pushserver` command line: serve (the default), or `pushserver token` to mint a token."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from urllib.parse import quote

from . import __version__, reexec, token_cli
from .config import ConfigError, Settings, add_arguments, load
from .core.tokens import weak_secret
from .monitor.allocator import jemalloc_library, wanted
from .redis_urls import parse_redis_url, redacted
from .usage import OneLineParser


def build_parser() -> argparse.ArgumentParser:
    token_usage = token_cli.build_parser().format_usage().removeprefix("usage: ")
    parser = OneLineParser(
        prog="pushserver",
        usage=f"%(prog)s [options]\n       {token_usage}",
        description=(
            "Long-polling / Comet push server: publish with POST /pub/CHANNEL, subscribe with "
            "GET /lp|/stream|/sse|/ws/CHANNELS. Settings come from flags, then PUSHSERVER_* "
            "environment variables, then the --config TOML file, then defaults. "
            "`pushserver token --help` mints subscribe tokens for --subscribe-secret."
        ),
    )
    parser.add_argument("--version", action="version", version=f"pushserver {__version__}")
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the settings as at start (and reach --redis when given), print a one-line "
        "summary and exit 0; a bad setting is one line and exit 2. Nothing is bound or served",
    )
    add_arguments(parser)
    return parser


CHECK_TIMEOUT = 5.0


def redis_nodes(url: str) -> list[str]:
    """The plain redis:// URLs of the nodes a --redis URL names: itself; for a cluster each
    seed node, with the URL's credentials; for Sentinel each sentinel (the credentials are the
    master's, not theirs)."""
    target = parse_redis_url(url)
    if target.kind == "single":
        return [url]
    scheme = "rediss" if target.tls else "redis"
    login = ""
    if target.kind == "cluster" and (target.username or target.password):
        login = f"{quote(target.username or '')}:{quote(target.password or '')}@"
    return [f"{scheme}://{login}{host}:{port}" for host, port in target.hosts]


def redis_problem(url: str) -> str:
    """Why Redis at `url` cannot be used ("" when one of its nodes answers PING)."""
    import redis

    problems = []
    for node in redis_nodes(url):
        client = redis.Redis.from_url(
            node, socket_timeout=CHECK_TIMEOUT, socket_connect_timeout=CHECK_TIMEOUT
        )
        try:
            client.ping()
            return ""
        except (redis.RedisError, OSError, ValueError) as exc:
            problems.append(str(exc) or type(exc).__name__)
        finally:
            client.close()
    return f"--redis {redacted(url)}: cannot reach Redis: {'; '.join(problems)}"


def summary(settings: Settings) -> str:
    """The one line `--check` prints for good settings."""
    broker = f"redis at {redacted(settings.redis)} (PING answered)" if settings.redis else "memory"
    processes = "1 process" if settings.workers == 1 else f"{settings.workers} workers"
    return (
        f"pushserver: settings OK: would listen on {settings.host}:{settings.port}, "
        f"{processes}, {broker} broker"
    )


def serve_on_jemalloc(allocator: str) -> None:
    """Replace this process with the same command on jemalloc when `reexec` says so; return
    otherwise. jemalloc is looked for only when nothing else decides: the replaced command
    finds `LD_PRELOAD` set and does not look again (one lookup per start)."""
    chosen = reexec.environment(allocator, os.environ, jemalloc_library)
    if chosen is not None:
        reexec.replace(chosen)


def main(argv: Sequence[str] | None = None) -> None:
    from_command_line = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["token"]:
        token_cli.main(argv[1:])
        return
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load(args)
    except ConfigError as exc:
        parser.error(str(exc))
    if args.check:
        problem = redis_problem(settings.redis) if settings.redis else ""
        if problem:
            parser.error(problem)
        print(summary(settings))
        return
    if from_command_line:
        serve_on_jemalloc(wanted(settings.allocator, bool(settings.redis)))
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    warning = weak_secret(settings.subscribe_secret, "--subscribe-secret")
    if warning:
        logging.getLogger("pushserver").warning(warning)
    from .runner import run

    try:
        run(settings)
    except ConfigError as exc:
        parser.error(str(exc))
