"""Settings, read from CLI flags, `PUSHSERVER_*` environment variables and a TOML file.

Precedence is flags > environment > TOML file > defaults, so an operator can keep a file for the
fleet and override one value on one box. Every setting is a field of `Settings`; its metadata
carries the help text, so `pushserver --help` documents all of them from one place.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import math
import os
import re
import resource
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .head_sizes import OTHER_HEADERS, longest_cursor, longest_subscribe_target
from .redis_urls import BadRedisUrl, RedisTarget, parse_redis_url, redacted

ENV_PREFIX = "PUSHSERVER_"
EXTENSION = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
"""`--extension`: a module's dotted name, a colon, and the name of a function in it."""

FILES_RESERVED = 100
"""Descriptors kept back from subscribers: listening socket, Redis, logs, the loop itself."""


def connections_the_open_files_allow() -> int:
    """Subscribers one process can hold once its soft open-file limit is raised to the hard one.

    The default `--max-connections`, so a default start fits the machine it starts on.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = soft if hard == resource.RLIM_INFINITY else hard
    if files == resource.RLIM_INFINITY:
        return 100_000
    return max(1, files - FILES_RESERVED)


def _setting(default: Any, help: str, **extra: Any) -> Any:
    return dataclasses.field(default=default, metadata={"help": help, **extra})


def _machine_channels() -> int:
    """A channel costs about 2 KB with no history: let them take an eighth of the memory."""
    return max(10_000, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 8 // 2048)


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    host: str = _setting("127.0.0.1", "address to listen on")
    port: int = _setting(8080, "TCP port to listen on (0 = pick a free one)", metavar="PORT")
    loop: str = _setting("uvloop", "event loop implementation", choices=("uvloop", "asyncio"))
    allocator: str = _setting(
        "auto",
        "memory allocator: auto = jemalloc with --redis when installed, which gives the memory "
        "of a flood of channels back by itself (the command restarts its interpreter on it; "
        "PYTHONMALLOC or LD_PRELOAD set by the operator are kept), else Python's own; "
        "jemalloc = jemalloc with either broker; pymalloc = Python's own",
        choices=("auto", "jemalloc", "pymalloc"),
    )
    workers: int = _setting(
        1, "server processes on one port (SO_REUSEPORT); more than 1 needs --redis"
    )
    redis: str = _setting(
        "",
        "Redis for the Redis broker: redis://host:port/db (rediss:// TLS, unix://), a cluster "
        "redis+cluster://host:port[,host:port...] (rediss+cluster:// TLS), or Sentinel "
        "redis+sentinel://host:port[,host:port...]/master[/db]; empty = memory broker",
        metavar="URL",
    )
    redis_replicas: int = _setting(
        -1,
        "replicas that must hold a publish (Redis WAIT) before it is acknowledged and delivered; "
        "a shard with fewer live replicas refuses publishes; -1 = 1 for a cluster or Sentinel, "
        "0 for one Redis",
    )
    redis_migration_wait: float = _setting(
        10.0,
        "seconds a publish or read whose Redis Cluster slot is being migrated follows the "
        "cluster's redirects (ASK, TRYAGAIN, MOVED) before it is refused 503 as stalled",
    )
    history_size: int = _setting(100, "messages kept per channel for resuming clients")
    history_ttl: float = _setting(300.0, "seconds a message stays in a channel's history")
    heartbeat: float = _setting(
        20.0, "seconds between heartbeats on streams (stream, SSE, WebSocket)"
    )
    default_timeout: float = _setting(30.0, "long-poll hold time when the client gives no ?timeout")
    max_timeout: float = _setting(120.0, "largest long-poll ?timeout accepted")
    longpoll_max_messages: int = _setting(
        100, "most events (messages and gaps) in one long-poll answer; a ?limit= above is this"
    )
    longpoll_max_bytes: int = _setting(
        32 << 10,
        "envelope bytes after which a long-poll answer is cut short (it says more is waiting); "
        "one event always goes, whatever its size",
    )
    max_buffer_bytes: int = _setting(
        1 << 20, "unsent bytes after which a slow subscriber is cut off"
    )
    max_flush_delay: float = _setting(
        0.002,
        "seconds a flush may wait for more messages to share its writes when the last one "
        "was costly (30 percent of its duration in whole ms, at most this; 0 = never wait)",
    )
    max_message_bytes: int = _setting(64 << 10, "largest published message body (413 above)")
    max_batch: int = _setting(1000, "largest number of messages in one POST /pub batch")
    max_channels_per_subscription: int = _setting(64, "channels one subscription may name")
    max_connections: int = _setting(
        connections_the_open_files_allow(),
        "held subscriber connections per process before 503 over_capacity (default: the "
        f"open-file hard limit less {FILES_RESERVED})",
    )
    max_channels: int = _setting(
        _machine_channels(),
        "channels held at once before a subscribe naming new ones gets 503 over_capacity "
        "(default: about 2 KB each in an eighth of this machine's memory)",
    )
    max_connections_per_ip: int = _setting(
        0, "held subscriber connections per client IP (0 = none)"
    )
    max_publish_rate: float = _setting(
        0.0, "publishes per second per key or IP (0 = unlimited)", metavar="RATE"
    )
    max_pad: int = _setting(8192, "largest ?pad= accepted on streams")
    max_line_size: int = _setting(40 << 10, "largest request target in bytes (fits any cursor)")
    max_field_size: int = _setting(16 << 10, "largest request header in bytes (fits any cursor)")
    max_headers: int = _setting(64, "most header lines in one request head")
    max_head_bytes: int = _setting(
        64 << 10,
        "largest whole request head in bytes (at least --max-line-size + --max-field-size + "
        "4096); the connection is closed above",
    )
    publish_key: str = _setting("", "bearer key for publishing and admin; empty = loopback only")
    subscribe_secret: str = _setting("", "HS256 secret; when set, subscribers need ?token=JWT")
    token_audience: str = _setting(
        "",
        "when set, subscribe tokens need this aud claim; when unset, tokens with aud are refused",
    )
    cors_origin: str = _setting(
        "", "comma-separated allowed CORS origins, or *; empty = no CORS", metavar="ORIGINS"
    )
    trusted_proxies: str = _setting(
        "",
        "comma-separated addresses or networks (CIDR) of reverse proxies whose X-Forwarded-For "
        "names the client; empty = trust none",
        metavar="ADDRESSES",
    )
    shutdown_timeout: float = _setting(10.0, "seconds to drain connections on SIGTERM/SIGINT")
    request_timeout: float = _setting(
        60.0, "seconds a client may take to send a request head, or stay idle between requests"
    )
    head_grace: float = _setting(
        1.0,
        "seconds a connection may wait for its request head before, when connections fill "
        "--max-connections, it gives way to a new one (and the least a head timeout "
        "shortens to under that pressure)",
    )
    gc_threshold: str = _setting(
        "50000,50,100",
        "cyclic GC thresholds gen0,gen1,gen2 (larger = rarer, shorter pauses)",
        metavar="GEN0,GEN1,GEN2",
    )
    sweep_interval: float = _setting(5.0, "seconds between sweeps that drop idle channels")
    log_level: str = _setting("info", "log level", choices=("debug", "info", "warning", "error"))
    access_log: bool = _setting(False, "log every request (costly under load)")
    compress: bool = _setting(
        True,
        "compress what clients accept: gzip for NDJSON and SSE streams (each message flushed) "
        "and for long-poll and JSONP answers of 512 bytes or more, permessage-deflate for "
        "WebSocket",
    )
    extension: str = _setting(
        "",
        "MODULE:FUNCTION called with the aiohttp application at startup, to add your own "
        "routes and middleware with aiohttp's API (docs/operations.md); empty = none",
        metavar="MODULE:FUNCTION",
    )

    @property
    def gc_thresholds(self) -> tuple[int, int, int]:
        a, b, c = (int(x) for x in self.gc_threshold.split(","))
        return a, b, c

    @property
    def redis_target(self) -> RedisTarget:
        """`redis` read (checked by `validate`)."""
        return parse_redis_url(self.redis)

    @property
    def wait_replicas(self) -> int:
        """`redis_replicas` with its default resolved for the kind of Redis named."""
        if self.redis_replicas >= 0:
            return self.redis_replicas
        return 0 if not self.redis or self.redis_target.kind == "single" else 1

    @property
    def cors_origins(self) -> tuple[str, ...]:
        return tuple(o.strip() for o in self.cors_origin.split(",") if o.strip())

    @property
    def trusted_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return tuple(
            ipaddress.ip_network(p.strip(), strict=False)
            for p in self.trusted_proxies.split(",")
            if p.strip()
        )


class ConfigError(ValueError):
    """A setting could not be read; the message names the source and the setting."""


FIELDS = {f.name: f for f in dataclasses.fields(Settings)}


KIND_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "text"}


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _convert(name: str, value: Any, label: str) -> Any:
    """One value from a flag, the environment (text) or the TOML file (text or typed)."""
    field = FIELDS[name]
    kind: type[Any] = type(field.default)  # every field has a plain default
    try:
        if isinstance(value, str) and kind is bool:
            if value.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError(value)
            converted: Any = value.lower() in ("1", "true", "yes", "on")
        elif isinstance(value, str) or (kind is float and type(value) is int):
            converted = kind(value)
        elif type(value) is kind:
            converted = value
        else:
            raise TypeError(value)
        if kind is float and not math.isfinite(converted):
            raise ValueError(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{label} must be {KIND_WORDS[kind]}, got {value!r}") from None
    choices = field.metadata.get("choices")
    if choices and converted not in choices:
        raise ConfigError(f"{label} must be one of {', '.join(choices)}, got {converted!r}")
    return converted


AT_LEAST_ONE = (
    "history_size",
    "max_buffer_bytes",
    "max_message_bytes",
    "max_batch",
    "max_channels_per_subscription",
    "max_connections",
    "max_line_size",
    "max_field_size",
    "longpoll_max_messages",
    "longpoll_max_bytes",
)
AT_LEAST_ZERO = (
    "max_connections_per_ip",
    "max_publish_rate",
    "max_pad",
    "shutdown_timeout",
    "redis_migration_wait",
)
POSITIVE = (
    "heartbeat",
    "history_ttl",
    "max_timeout",
    "sweep_interval",
    "request_timeout",
    "head_grace",
)


def validate(settings: Settings, labels: Mapping[str, str] | None = None) -> Settings:
    """Reject values and combinations that cannot work, naming where each value came from.

    `labels` maps a setting to its source (an environment variable, the TOML file); the flag is
    named otherwise.
    """

    def bad(name: str, rule: str) -> ConfigError:
        label = (labels or {}).get(name) or flag(name)
        return ConfigError(f"{label} must be {rule}, got {getattr(settings, name)!r}")

    if not 0 <= settings.port <= 65535:
        raise bad("port", "0..65535")
    if settings.workers < 1:
        raise bad("workers", "at least 1")
    if settings.workers > 1 and not settings.redis:
        raise ConfigError(
            "--workers > 1 needs --redis: worker processes share channels only through Redis"
        )
    for name in AT_LEAST_ONE:
        if getattr(settings, name) < 1:
            raise bad(name, "at least 1")
    for name in AT_LEAST_ZERO:
        if getattr(settings, name) < 0:
            raise bad(name, "0 or more")
    for name in POSITIVE:
        if getattr(settings, name) <= 0:
            raise bad(name, "positive")
    if settings.redis_replicas < -1:
        raise bad("redis_replicas", "-1 (the default for the kind of Redis) or 0 or more")
    if not 0 <= settings.max_flush_delay <= 0.1:
        raise bad("max_flush_delay", "0..0.1 seconds")
    if not 0 <= settings.default_timeout <= settings.max_timeout:
        raise bad("default_timeout", f"0..--max-timeout ({settings.max_timeout:g})")
    try:
        settings.gc_thresholds  # noqa: B018 - parses
    except ValueError:
        raise bad("gc_threshold", "three integers a,b,c") from None
    try:
        settings.trusted_networks  # noqa: B018 - parses
    except ValueError:
        raise bad("trusted_proxies", "IP addresses or CIDR networks, comma-separated") from None
    _check_head_limits(settings, bad)
    if settings.extension and not EXTENSION.fullmatch(settings.extension):
        raise bad("extension", "MODULE:FUNCTION, as in mypackage.routes:extend")
    if settings.redis:
        try:
            settings.redis_target  # noqa: B018 - parses
        except BadRedisUrl as exc:
            label = (labels or {}).get("redis") or flag("redis")
            raise ConfigError(f"{label} must be {exc}, got {redacted(settings.redis)!r}") from None
    return settings


def _check_head_limits(settings: Settings, bad: Callable[[str, str], ConfigError]) -> None:
    """Every subscription the server accepts must be able to come back with its cursor: in
    its URL, or in an SSE client's `Last-Event-ID`."""
    channels = settings.max_channels_per_subscription
    because = f"for --max-channels-per-subscription {channels}"
    target = longest_subscribe_target(channels)
    if settings.max_line_size < target:
        raise bad("max_line_size", f"at least {target} {because} (its URL with its cursor)")
    field = len("last-event-id") + longest_cursor(channels)
    if settings.max_field_size < field:
        raise bad("max_field_size", f"at least {field} {because} (a Last-Event-ID cursor)")
    head = settings.max_line_size + settings.max_field_size + OTHER_HEADERS
    if settings.max_head_bytes < head:
        raise bad(
            "max_head_bytes",
            f"at least --max-line-size + --max-field-size + {OTHER_HEADERS} ({head})",
        )


def _metavar(field: dataclasses.Field) -> str | None:
    """What a flag's value is: a count, seconds, bytes; None lets argparse list the choices."""
    if "choices" in field.metadata:
        return None
    if "metavar" in field.metadata:
        return field.metadata["metavar"]
    kind = type(field.default)
    if kind is int:
        return "BYTES" if field.name.endswith("_bytes") else "N"
    if kind is float:
        return "SECONDS"
    return field.name.split("_")[-1].upper()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting; defaults are left unset so the other sources can show through."""
    parser.add_argument("--config", metavar="FILE", help="TOML file with settings (keys as below)")
    for f in FIELDS.values():
        env = ENV_PREFIX + f.name.upper()
        help_text = f"{f.metadata['help']} (env {env}, default {f.default!r})"
        if isinstance(f.default, bool):
            parser.add_argument(
                flag(f.name),
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        else:
            parser.add_argument(
                flag(f.name),
                dest=f.name,
                default=None,
                metavar=_metavar(f),
                choices=f.metadata.get("choices"),
                help=help_text,
            )


def load(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> Settings:
    """Merge the sources in precedence order and validate the result."""
    values: dict[str, Any] = {}
    labels: dict[str, str] = {}
    if getattr(args, "config", None):
        path = Path(args.config)
        for name, value in _read_toml(path).items():
            labels[name] = f"{flag(name)} (config file {path})"
            values[name] = _convert(name, value, labels[name])
    for name in FIELDS:
        env = ENV_PREFIX + name.upper()
        if env in environ:
            labels[name] = env
            values[name] = _convert(name, environ[env], env)
    for name in FIELDS:
        value = getattr(args, name, None)
        if value is not None:
            labels[name] = flag(name)
            values[name] = _convert(name, value, flag(name))
    return validate(Settings(**values), labels)


def _read_toml(path: Path) -> dict[str, Any]:
    """The file's settings by name, unconverted."""
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"--config: cannot read {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--config: {path} is not valid TOML: {exc}") from None
    table = data.get("pushserver", data)
    if not isinstance(table, dict):
        raise ConfigError(f"--config: {path}: [pushserver] must be a table")
    values = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in FIELDS:
            raise ConfigError(f"--config: {path}: unknown setting {key!r}")
        values[name] = value
    return values


def parse(argv: Sequence[str] | None = None) -> Settings:
    """Settings from a command line, for tests and embedding."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return load(parser.parse_args(argv))
