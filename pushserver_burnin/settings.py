"""The burn-in settings: one definition for the command line, Locust's web UI and the workers."""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TESTS = ("subscribers", "channels")
TRANSPORTS = ("longpoll", "stream", "sse", "ws")
SATURATED_CPU = 90.0  # % of one core: above it a step measures the load generator
PUBLISHER_MIN_RATE = 0.95  # of --rate, below which the run stops
DRAIN_GRACE = 3.0  # seconds after the ceiling before undelivered messages count as lost


@dataclass(frozen=True)
class Fault:
    """`--fault STEP:COMMAND`: a shell command run when step STEP starts publishing."""

    step: int
    command: str

    @classmethod
    def parse(cls, text: str) -> Fault:
        step, colon, command = text.partition(":")
        if not colon or not step.strip().isdigit() or int(step) < 1 or not command.strip():
            raise ValueError(f"--fault must be STEP:COMMAND (a step from 1), got {text!r}")
        return cls(int(step), command)

    def __str__(self) -> str:
        return f"{self.step}:{self.command}"


@dataclass(frozen=True)
class Settings:
    """One run's settings; defaults live in OPTIONS below."""

    test: str
    transport: str
    ceiling: float
    step: int
    factor: float
    start: int
    step_seconds: float
    repeats: int
    rate: float
    max: int
    max_minutes: float
    spawn_rate: float
    out: str
    label: str
    run_id: str
    publish_key: str
    source_ip: str
    churn: float
    probe: bool
    workers: int
    faults: tuple[Fault, ...] = ()

    def counts(self) -> list[int]:
        """Subscriber counts of successive steps: +step each, or times --factor when set."""
        count = self.start or self.step
        counts = []
        while True:
            counts.append(min(count, self.max))
            if count >= self.max:
                return counts
            if self.factor:
                count = max(count + 1, math.ceil(count * self.factor))
            else:
                count += self.step

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def new_run_id() -> str:
    return uuid.uuid4().hex[:10]


# (name, type, default, help): one table for argparse (CLI) and Locust's custom arguments
OPTIONS: list[tuple[str, type, Any, str]] = [
    ("test", str, "subscribers", "subscribers (all on one channel) or channels (one each)"),
    ("transport", str, "longpoll", "longpoll, stream, sse or ws"),
    ("ceiling", float, 1.0, "stop once a step's worst end-to-end latency passes this (s)"),
    ("step", int, 100, "subscribers added per step"),
    ("factor", float, 0.0, "grow the count geometrically by this factor instead (e.g. 2)"),
    ("start", int, 0, "subscribers in the first step (default: --step)"),
    ("step-seconds", float, 10.0, "publishing time per step (s)"),
    ("repeats", int, 1, "steps measured at each subscriber count, for a spread per point"),
    ("rate", float, 2.0, "messages per second to every channel under test"),
    ("max", int, 1_000_000, "stop after the step that reaches this many subscribers"),
    ("max-minutes", float, 30.0, "stop the run after this many minutes"),
    ("spawn-rate", float, 1000.0, "subscribers connected per second while ramping"),
    ("out", str, "burnin-results", "directory of results.jsonl"),
    ("label", str, "", "legend label in charts (default test/transport)"),
    ("run-id", str, "", "run id (default: a new one)"),
    ("publish-key", str, os.environ.get("PUSHSERVER_PUBLISH_KEY", ""), "server publish key"),
    ("source-ip", str, "auto", "local address of subscriber sockets: auto, none or an IP"),
    ("churn", float, 0.0, "subscribers dropped and resumed from their cursors per second"),
]
FAULT_HELP = (
    "run this shell command when step STEP starts publishing (repeatable), e.g. "
    "'3:systemctl restart redis'"
)


def add_locust_arguments(parser: Any) -> None:
    """Register the settings as Locust custom arguments (shown in the web UI, sent to workers)."""
    for name, kind, default, text in OPTIONS:
        extra = {"is_secret": True} if name == "publish-key" else {}
        parser.add_argument(f"--burnin-{name}", type=kind, default=default, help=text, **extra)
    parser.add_argument(
        "--burnin-no-probe", action="store_true", help="do not start the probe subscriber"
    )
    parser.add_argument(
        "--burnin-fault", action="append", default=[], metavar="STEP:COMMAND", help=FAULT_HELP
    )


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    for name, kind, default, text in OPTIONS:
        if name != "test":
            parser.add_argument(f"--{name}", type=kind, default=default, help=text)
    parser.add_argument("--no-probe", action="store_true", help="no independent probe subscriber")
    parser.add_argument(
        "--fault", action="append", default=[], metavar="STEP:COMMAND", help=FAULT_HELP
    )


def build(
    lookup: Callable[[str], Any], probe: bool, workers: int, faults: list[str] | None = None
) -> Settings:
    """Validated settings from any source that answers by attribute name (e.g. "step_seconds");
    ValueError names the first bad one."""
    values = {name.replace("-", "_"): lookup(name.replace("-", "_")) for name, *_ in OPTIONS}
    parsed = tuple(Fault.parse(text) for text in faults or [])
    settings = Settings(**values, probe=probe, workers=workers, faults=parsed)
    validate(settings)
    return settings


def from_locust_options(options: Any, workers: int = 0) -> Settings:
    return build(
        lambda attr: getattr(options, f"burnin_{attr}"),
        not options.burnin_no_probe,
        workers,
        options.burnin_fault,
    )


COMMAND_ENV = "PUSHSERVER_BURNIN_COMMAND"
"""How pushserver-burnin tells its Locust master the command line the user typed."""
RUNNER_ENV = "PUSHSERVER_BURNIN_RUNNER"
"""Set for a master that pushserver-burnin started: the runner prints the end of the run
itself, after Locust's summary, so the verdict is the last thing on screen."""
SOURCE_IP_ENV = "PUSHSERVER_BURNIN_SOURCE_IP"
"""A worker's own source address (`pushserver-burnin worker --source-ip`), which wins over the
master's --source-ip setting."""
_SECRET_OPTIONS = ("--publish-key", "--burnin-publish-key")


def shown_command(argv: list[str]) -> str:
    """The command line as the user typed it, for the results header, the publish key hidden."""
    shown = []
    hide_next = False
    for arg in argv:
        name, equals, _ = arg.partition("=")
        if hide_next:
            arg = "***"
        elif equals and name in _SECRET_OPTIONS:
            arg = f"{name}=***"
        hide_next = arg in _SECRET_OPTIONS
        shown.append(arg)
    return shlex.join(shown)


def recorded_command() -> str:
    """The command that started this run: pushserver-burnin's, else this Locust process's."""
    return os.environ.get(COMMAND_ENV) or shown_command([Path(sys.argv[0]).name, *sys.argv[1:]])


def locust_arguments(settings: Settings) -> list[str]:
    """The --burnin-* arguments that give a Locust master these settings.

    The publish key is left out: it goes to the child in its environment, not on a command
    line that every user of the machine can read.
    """
    arguments = []
    for name, *_ in OPTIONS:
        if name != "publish-key":
            arguments += [f"--burnin-{name}", str(getattr(settings, name.replace("-", "_")))]
    if not settings.probe:
        arguments.append("--burnin-no-probe")
    for fault in settings.faults:
        arguments += ["--burnin-fault", str(fault)]
    return arguments


POSITIVE = ("step", "rate", "step_seconds", "ceiling", "max", "max_minutes", "spawn_rate")


def _flag(attr: str) -> str:
    return "--" + attr.replace("_", "-")


def validate(settings: Settings) -> None:
    """Raise ValueError naming the first setting that cannot work."""
    if settings.test not in TESTS:
        raise ValueError(f"test must be one of {', '.join(TESTS)}, got {settings.test!r}")
    if settings.transport not in TRANSPORTS:
        raise ValueError(
            f"--transport must be one of {', '.join(TRANSPORTS)}, got {settings.transport!r}"
        )
    for attr in POSITIVE:
        value = getattr(settings, attr)
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"{_flag(attr)} must be positive, got {value:g}")
    if settings.factor and (not math.isfinite(settings.factor) or settings.factor <= 1):
        raise ValueError(f"--factor must be above 1, got {settings.factor:g}")
    if settings.start < 0:
        raise ValueError(f"--start must be 0 (= --step) or more, got {settings.start}")
    if settings.repeats < 1:
        raise ValueError(f"--repeats must be at least 1, got {settings.repeats}")
    if not math.isfinite(settings.churn) or settings.churn < 0:
        raise ValueError(f"--churn must be 0 or more, got {settings.churn:g}")
    if settings.workers < 0:
        raise ValueError(f"--workers must be 0 or more, got {settings.workers}")
    if settings.faults:
        steps = len(settings.counts()) * settings.repeats
        late = [fault for fault in settings.faults if fault.step > steps]
        if late:
            raise ValueError(f"--fault {late[0]}: the run has only {steps} steps")
