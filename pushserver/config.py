"""Settings, read from CLI flags, `PUSHSERVER_*` environment variables and a TOML file.

Precedence is flags > environment > TOML file > defaults, so an operator can keep a file for the
fleet and override one value on one box. Every setting is a field of `Settings`; its metadata
carries the help text, so `pushserver --help` documents all of them from one place.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ENV_PREFIX = "PUSHSERVER_"


def _setting(default: Any, help: str, **extra: Any) -> Any:
    return dataclasses.field(default=default, metadata={"help": help, **extra})


def _machine_channels() -> int:
    """A channel costs about 2 KB with no history: let them take an eighth of the memory."""
    return max(10_000, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 8 // 2048)


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    host: str = _setting("127.0.0.1", "address to listen on")
    port: int = _setting(8080, "TCP port to listen on (0 = pick a free one)")
    loop: str = _setting("uvloop", "event loop implementation", choices=("uvloop", "asyncio"))
    workers: int = _setting(
        1, "server processes on one port (SO_REUSEPORT); more than 1 needs --redis"
    )
    redis: str = _setting(
        "", "Redis URL (redis://host:port/db) for the Redis broker; empty = memory broker"
    )
    history_size: int = _setting(100, "messages kept per channel for resuming clients")
    history_ttl: float = _setting(300.0, "seconds a message stays in a channel's history")
    heartbeat: float = _setting(
        20.0, "seconds between heartbeats on streams (stream, SSE, WebSocket)"
    )
    default_timeout: float = _setting(30.0, "long-poll hold time when the client gives no ?timeout")
    max_timeout: float = _setting(120.0, "largest long-poll ?timeout accepted")
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
    max_connections: int = _setting(100_000, "held subscriber connections before 503 over_capacity")
    max_channels: int = _setting(
        _machine_channels(),
        "channels held at once before a subscribe naming new ones gets 503 over_capacity "
        "(default: about 2 KB each in an eighth of this machine's memory)",
    )
    max_connections_per_ip: int = _setting(
        0, "held subscriber connections per client IP (0 = none)"
    )
    max_publish_rate: float = _setting(0.0, "publishes per second per key or IP (0 = unlimited)")
    max_pad: int = _setting(8192, "largest ?pad= accepted on streams")
    max_line_size: int = _setting(8190, "largest request line / URL in bytes")
    max_field_size: int = _setting(8190, "largest request header in bytes")
    max_headers: int = _setting(64, "most header lines in one request head")
    max_head_bytes: int = _setting(
        32 << 10, "largest whole request head in bytes; the connection is closed above"
    )
    publish_key: str = _setting("", "bearer key for publishing and admin; empty = loopback only")
    subscribe_secret: str = _setting("", "HS256 secret; when set, subscribers need ?token=JWT")
    token_audience: str = _setting(
        "",
        "when set, subscribe tokens need this aud claim; when unset, tokens with aud are refused",
    )
    cors_origin: str = _setting("", "comma-separated allowed CORS origins, or *; empty = no CORS")
    shutdown_timeout: float = _setting(10.0, "seconds to drain connections on SIGTERM/SIGINT")
    request_timeout: float = _setting(
        60.0, "seconds a client may take to send a request head, or stay idle between requests"
    )
    gc_threshold: str = _setting(
        "50000,50,100", "cyclic GC thresholds gen0,gen1,gen2 (larger = rarer, shorter pauses)"
    )
    sweep_interval: float = _setting(5.0, "seconds between sweeps that drop idle channels")
    log_level: str = _setting("info", "log level", choices=("debug", "info", "warning", "error"))
    access_log: bool = _setting(False, "log every request (costly under load)")

    @property
    def gc_thresholds(self) -> tuple[int, int, int]:
        a, b, c = (int(x) for x in self.gc_threshold.split(","))
        return a, b, c

    @property
    def cors_origins(self) -> tuple[str, ...]:
        return tuple(o.strip() for o in self.cors_origin.split(",") if o.strip())


class ConfigError(ValueError):
    """A setting could not be read; the message names the source and the setting."""


FIELDS = {f.name: f for f in dataclasses.fields(Settings)}


def _convert(name: str, value: Any, source: str) -> Any:
    field = FIELDS[name]
    kind = type(field.default)
    try:
        if kind is bool and isinstance(value, str):
            if value.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError(value)
            value = value.lower() in ("1", "true", "yes", "on")
        else:
            value = kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: {name} must be {kind.__name__}, got {value!r}") from None
    choices = field.metadata.get("choices")
    if choices and value not in choices:
        raise ConfigError(f"{source}: {name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def validate(settings: Settings) -> Settings:
    """Reject combinations that cannot work, with a message an operator can act on."""
    try:
        settings.gc_thresholds  # noqa: B018 - parses
    except ValueError:
        raise ConfigError(
            f"gc_threshold must be three integers a,b,c, got {settings.gc_threshold!r}"
        ) from None
    if settings.workers < 1:
        raise ConfigError("workers must be at least 1")
    if settings.workers > 1 and not settings.redis:
        raise ConfigError(
            "--workers > 1 needs --redis: worker processes share channels only through Redis"
        )
    for name in ("history_size", "max_buffer_bytes", "max_message_bytes", "max_batch"):
        if getattr(settings, name) < 1:
            raise ConfigError(f"{name} must be at least 1")
    for name in ("heartbeat", "history_ttl", "max_timeout", "sweep_interval", "request_timeout"):
        if getattr(settings, name) <= 0:
            raise ConfigError(f"{name} must be positive")
    if not 0 <= settings.max_flush_delay <= 0.1:
        raise ConfigError("max_flush_delay must be between 0 and 0.1 seconds")
    if not 0 <= settings.default_timeout <= settings.max_timeout:
        raise ConfigError("default_timeout must be between 0 and max_timeout")
    return settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting; defaults are left unset so the other sources can show through."""
    parser.add_argument("--config", metavar="FILE", help="TOML file with settings (keys as below)")
    for f in FIELDS.values():
        flag = "--" + f.name.replace("_", "-")
        env = ENV_PREFIX + f.name.upper()
        help_text = f"{f.metadata['help']} (env {env}, default {f.default!r})"
        if isinstance(f.default, bool):
            parser.add_argument(
                flag,
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        else:
            parser.add_argument(
                flag,
                dest=f.name,
                default=None,
                metavar=f.name.split("_")[-1].upper(),
                choices=f.metadata.get("choices"),
                help=help_text,
            )


def load(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> Settings:
    """Merge the sources in precedence order and validate the result."""
    values: dict[str, Any] = {}
    if getattr(args, "config", None):
        values.update(_read_toml(Path(args.config)))
    for name in FIELDS:
        env = ENV_PREFIX + name.upper()
        if env in environ:
            values[name] = _convert(name, environ[env], f"environment {env}")
    for name in FIELDS:
        value = getattr(args, name, None)
        if value is not None:
            values[name] = _convert(name, value, "--" + name.replace("_", "-"))
    return validate(Settings(**values))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    table = data.get("pushserver", data)
    values = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in FIELDS:
            raise ConfigError(f"config file {path}: unknown setting {key!r}")
        values[name] = _convert(name, value, f"config file {path}")
    return values


def parse(argv: Sequence[str] | None = None) -> Settings:
    """Settings from a command line, for tests and embedding."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return load(parser.parse_args(argv))
