"""What `--redis` names: one Redis, a Redis Cluster, or a master watched by Sentinel.

`redis://`, `rediss://` and `unix://` name one Redis and are read by redis-py itself; the other
forms name several hosts in one URL, which no URL parser reads, so they are read here:

    redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]      seed nodes (TLS: rediss+)
    redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]

A port may be left out (6379 for a cluster node, 26379 for a sentinel). The user and password
are Redis's (the cluster's nodes, or the master and its replicas), never the sentinels'. A
leaf module like `config`, which checks every URL with it before anything starts.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse

SINGLE_SCHEMES = ("redis", "rediss", "unix")
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
SENTINEL_SCHEMES = ("redis+sentinel",)
SCHEMES = (*SINGLE_SCHEMES, *CLUSTER_SCHEMES, *SENTINEL_SCHEMES)
FORMS = {
    "redis+cluster": "redis+cluster://HOST:PORT[,HOST:PORT...]",
    "rediss+cluster": "rediss+cluster://HOST:PORT[,HOST:PORT...]",
    "redis+sentinel": "redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB]",
}
DEFAULT_PORTS = {"redis+cluster": 6379, "rediss+cluster": 6379, "redis+sentinel": 26379}
MASTER_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
PASSWORD_OPTION_RE = re.compile(r"([?&]password=)[^&#]*")
HOST_RE = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9_.-]+))(?::([0-9]{1,5}))?")


class BadRedisUrl(ValueError):
    """A `--redis` value that names no Redis; the message says what is wrong with it."""


@dataclasses.dataclass(frozen=True, slots=True)
class RedisTarget:
    """A parsed `--redis`. For one Redis only `url` and `kind` are set: redis-py reads it."""

    url: str
    kind: str
    """"single", "cluster" or "sentinel"."""
    hosts: tuple[tuple[str, int], ...] = ()
    """A cluster's seed nodes, or the sentinels."""
    tls: bool = False
    master: str = ""
    """The name the sentinels know the master by."""
    db: int = 0
    username: str | None = None
    password: str | None = None


def parse_redis_url(url: str) -> RedisTarget:
    """Read `url`, or raise `BadRedisUrl` saying what is wrong (never echoing a password)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise BadRedisUrl(f"a {', '.join(s + '://' for s in SCHEMES)} URL")
    scheme = scheme.lower()
    if scheme in SINGLE_SCHEMES:
        try:
            urllib.parse.urlsplit(url).port  # noqa: B018 - raises on a port out of range
        except ValueError:
            raise BadRedisUrl("a URL with a port of 0..65535") from None
        return RedisTarget(url, "single")
    form = FORMS[scheme]
    if "?" in rest or "#" in rest:
        raise BadRedisUrl(f"{form} with no ?query or #fragment")
    netloc, _, path = rest.partition("/")
    userinfo, at, hostlist = netloc.rpartition("@")
    username, password = _credentials(userinfo) if at else (None, None)
    hosts = tuple(_host(h, DEFAULT_PORTS[scheme], form) for h in hostlist.split(","))
    if scheme in CLUSTER_SCHEMES:
        if path not in ("", "0"):
            raise BadRedisUrl(f"{form} (a cluster has database 0 only)")
        return RedisTarget(
            url, "cluster", hosts, scheme.startswith("rediss"), "", 0, username, password
        )
    master, _, db = path.partition("/")
    master = urllib.parse.unquote(master)
    if not MASTER_RE.fullmatch(master):
        raise BadRedisUrl(f"{form} (MASTER: the name the sentinels know, of A-Z a-z 0-9 _.:-)")
    if db and not (db.isascii() and db.isdigit() and len(db) <= 5):
        raise BadRedisUrl(f"{form} (DB: a database number)")
    return RedisTarget(url, "sentinel", hosts, False, master, int(db or 0), username, password)


def _host(text: str, default_port: int, form: str) -> tuple[str, int]:
    match = HOST_RE.fullmatch(text)
    if match is None:
        raise BadRedisUrl(f"{form} (HOST:PORT pairs separated by commas)")
    v6, name, port = match.groups()
    number = default_port if port is None else int(port)
    if not 1 <= number <= 65535:
        raise BadRedisUrl(f"{form} (a PORT of 1..65535)")
    return v6 or name, number


def _credentials(userinfo: str) -> tuple[str | None, str | None]:
    """As redis-py reads `redis://USER:PASSWORD@`: either may be empty, and is then unset."""
    user, _, password = userinfo.partition(":")
    return urllib.parse.unquote(user) or None, urllib.parse.unquote(password) or None


def redacted(url: str) -> str:
    """`url` with its password (in the user part or a `password=` option) hidden, for
    messages and logs."""
    url = PASSWORD_OPTION_RE.sub(r"\1***", url)
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    userinfo, _, hosts = netloc.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if not sep or not colon or not password:
        return url
    return f"{scheme}://{user}:***@{hosts}{slash}{path}"
