"""The bench's inputs checked before any experiment runs: URLs (scheme, port, something
listening), the JSON output path, counts, and the server settings (`--redis`, `--server-arg`)
judged by `pushserver --check` itself. Each problem is one line naming the option."""

from __future__ import annotations

import argparse

from pushserver_measure import checks


def _urls(args: argparse.Namespace) -> str:
    for option, url in (
        ("--url", args.url),
        ("--pub-url", args.pub_url),
        ("--sub-url", args.sub_url),
    ):
        if url and (problem := checks.http_url(option, url) or checks.reachable(option, url)):
            return problem
    return ""


def problem(args: argparse.Namespace, sizes: list[int]) -> str:
    """The first input that cannot work ("" when every one can)."""
    found = checks.at_least("--processes", args.processes, 1) or _urls(args)
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
