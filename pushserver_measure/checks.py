"""Input checks the measuring tools run before they start anything.

Each check returns one line naming the setting and what is wrong with it, or "" when the value
is usable: a tool prints the first such line and exits 2, so a typo never becomes a traceback
or, worse, a run that measures nothing for half an hour.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

CHECK_TIMEOUT = 15.0


def http_url(setting: str, url: str) -> str:
    """An http:// URL with a host and a port in 1..65535."""
    parts = urlsplit(url)
    if parts.scheme != "http" or "://" not in url:
        return f"{setting} must be an http:// URL, got {url!r}"
    try:
        port = parts.port
    except ValueError:
        return f"{setting}: port out of range 1..65535 in {url!r}"
    if not parts.hostname:
        return f"{setting} must name a host, got {url!r}"
    if port == 0:
        return f"{setting}: port out of range 1..65535 in {url!r}"
    return ""


def reachable(setting: str, url: str, timeout: float = 5.0) -> str:
    """Something accepts TCP connections at the URL's host and port (a run that cannot reach
    what it measures fails: exit 1, not a bad setting)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        return f"{setting}: target unreachable at {host}:{port}: {why}"


def writable_dir(setting: str, path: str) -> str:
    """A directory that exists or can be made, and that this process may write in."""
    where = Path(path)
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{setting}: cannot create the directory {path!r}: {exc.strerror or exc}"
    if not os.access(where, os.W_OK | os.X_OK):
        return f"{setting}: the directory {path!r} is not writable"
    return ""


def writable_file(setting: str, path: str) -> str:
    """A file that can be written: its directory exists and is writable, it is no directory."""
    where = Path(path)
    folder = where.parent
    if where.is_dir():
        return f"{setting}: {path!r} is a directory"
    if not folder.is_dir():
        return f"{setting}: no directory {str(folder)!r} to write {where.name!r} in"
    if not os.access(folder, os.W_OK | os.X_OK) or (
        where.exists() and not os.access(where, os.W_OK)
    ):
        return f"{setting}: {path!r} is not writable"
    return ""


def positive(setting: str, value: float) -> str:
    return "" if value > 0 else f"{setting} must be positive, got {value:g}"


def at_least(setting: str, value: float, least: float) -> str:
    return "" if value >= least else f"{setting} must be at least {least:g}, got {value:g}"


def local_address(setting: str, address: str, port: int = 0) -> str:
    """An IP address of this machine: one a socket can bind to (on `port`, when given)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return f"{setting} must be an IP address of this machine, got {address!r}"
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((address, port))
    except OSError as exc:
        where = f"{address} port {port}" if port else address
        return f"{setting}: cannot listen on {where} ({exc.strerror or exc})"
    return ""


def server_settings(settings: Sequence[str], named: str) -> str:
    """What `pushserver --check` says of these server settings ("" when it accepts them).

    The server is its own judge of its settings (and reaches the Redis URL when one is given),
    so a tool that starts servers asks it before the run rather than repeat its rules."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pushserver", "--check", *settings],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"{named}: pushserver --check did not answer within {CHECK_TIMEOUT:g} s"
    if done.returncode == 0:
        return ""
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    line = said[-1].removeprefix("pushserver: error: ") if said else f"exit {done.returncode}"
    return f"{named}: pushserver --check: {line}"


def first(*problems: str) -> str:
    """The first problem found, "" when there is none."""
    return next((problem for problem in problems if problem), "")
