"""The bench's inputs checked before any experiment runs: URLs (scheme, port), the JSON output
path, counts, and the server settings (`--redis`, `--server-arg`) judged by `pushserver --check`
itself; each problem is one line naming the option (exit 2). A URL nothing listens at is a run
that cannot measure (exit 1), found before any experiment starts."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from pushserver_measure import checks

URLS = ("url", "pub_url", "sub_url")
SELF_CHECKING = {9, 10}
"""Experiments that find an unreachable target themselves and report it in their table."""


def _urls(args: argparse.Namespace, check: Callable[[str, str], str]) -> str:
    """The first of --url, --pub-url and --sub-url given that `check` finds a problem with."""
    for name in URLS:
        url = getattr(args, name)
        if url and (problem := check("--" + name.replace("_", "-"), url)):
            return problem
    return ""


def unreachable(args: argparse.Namespace, numbers: list[int]) -> str:
    """Why a URL to measure cannot be reached ("" when each can, or when the experiments
    chosen check it themselves)."""
    return "" if set(numbers) <= SELF_CHECKING else _urls(args, checks.reachable)


def problem(args: argparse.Namespace, sizes: list[int]) -> str:
    """The first input that cannot work ("" when every one can)."""
    found = checks.at_least("--processes", args.processes, 1) or _urls(args, checks.http_url)
    if not found:
        found = next((f"--subscribers must be positive, got {n}" for n in sizes if n < 1), "")
    if not found and args.json:
        found = checks.writable_file("--json", args.json)
    if not found and args.target == "pushserver" and (args.redis or args.server_arg):
        named = " and ".join(
            name
            for name, given in (("--redis", args.redis), ("--server-arg", args.server_arg))
            if given
        )
        server = [*args.server_arg, *(["--redis", args.redis] if args.redis else [])]
        found = checks.server_settings(server, named)
    return found
