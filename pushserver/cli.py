"""`pushserver` command line: serve (the default), or `pushserver token` to mint a token."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from . import __version__, token_cli
from .config import ConfigError, add_arguments, load
from .core.tokens import weak_secret
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
    add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
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
