"""`pushserver token`: mint a subscribe token, for trying a server that has --subscribe-secret.

App servers mint their own tokens with any JWT library; this one is for tests and curl sessions.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .config import ENV_PREFIX
from .core.names import is_channel
from .core.tokens import mint, weak_secret
from .usage import OneLineParser

SECRET_ENV = ENV_PREFIX + "SUBSCRIBE_SECRET"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="pushserver token",
        description="Print an HS256 subscribe token (JWT) for the given channels.",
    )
    parser.add_argument(
        "--channels",
        required=True,
        help="comma-separated channel names; a trailing * allows a prefix (news,user.42.*)",
    )
    parser.add_argument(
        "--ttl",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="seconds the token is valid (default %(default)g)",
    )
    parser.add_argument("--secret", help=f"the server's --subscribe-secret (env {SECRET_ENV})")
    return parser


def main(argv: Sequence[str]) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    secret = args.secret or os.environ.get(SECRET_ENV, "")
    if not secret:
        parser.error(f"give --secret or set {SECRET_ENV}")
    channels = [c.strip() for c in args.channels.split(",") if c.strip()]
    bad = [c for c in channels if c != "*" and not is_channel(c.removesuffix("*"))]
    if not channels or bad:
        parser.error(f"--channels must be channel names or prefixes ending in *, got {bad}")
    if not 0 < args.ttl < float("inf"):
        parser.error(f"--ttl must be a positive number of seconds, got {args.ttl:g}")
    warning = weak_secret(secret, "the secret")
    if warning:
        sys.stderr.write(f"{parser.prog}: warning: {warning}\n")
    sys.stdout.write(mint(channels, args.ttl, secret) + "\n")
