"""`pushserver` command line: serve (the default), or `pushserver token` to mint a token."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from . import __version__
from .config import ConfigError, add_arguments, load


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pushserver",
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
        from .token_cli import main as token_main

        token_main(argv[1:])
        return
    args = build_parser().parse_args(argv)
    try:
        settings = load(args)
    except ConfigError as exc:
        sys.exit(f"pushserver: error: {exc}")
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from .runner import run

    run(settings)
