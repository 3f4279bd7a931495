"""The step controller: raises the subscriber count, publishes, drains, judges, writes a line.

It runs on the Locust master (or the single local process) as one greenlet. The load shape only
reads `target` and `finished` from it, so the same shape works headless and in the web UI.

One step: wait until every subscriber of the new count has its cursor; publish for
--step-seconds (each message tagged with the step); wait until every expected delivery of the
step has been counted, or for ceiling + a grace period; then write the step and decide whether
to go on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import gevent

from pushserver_burnin.churn import Churner, DropHook
from pushserver_burnin.faults import FaultRun
from pushserver_burnin.histogram import Latencies
from pushserver_burnin.preflight import server_problem
from pushserver_burnin.probe import ProbeProcess
from pushserver_burnin.progress import progress_line
from pushserver_burnin.publisher import Publisher, PublishHook, PublishResult
from pushserver_burnin.resources import (
    Clock,
    Snapshot,
    connection_count,
    loadgen_figures,
    own_clock,
    server_figures,
    total,
)
from pushserver_burnin.results import FORMAT, TOOL, ResultsWriter
from pushserver_burnin.settings import (
    DRAIN_GRACE,
    PUBLISHER_MIN_RATE,
    RUNNER_ENV,
    Settings,
    recorded_command,
)
from pushserver_burnin.tally import StepBook
from pushserver_burnin.workers import Reading, ServerWorkers
from pushserver_measure.http11 import Endpoint
from pushserver_measure.machine import machine_info
from pushserver_measure.verdict import Point, step_side, verdict

_POLL = 0.05
IDLE_SUMMED = ("rss_bytes", "channels", "messages_in", "connections")
"""What the header records of the server before the first subscriber, over all its workers:
the memory baseline, and whether the server was fresh (nothing published, no channel held)."""


def idle_figures(workers: Reading) -> dict[str, Any]:
    """The whole server before the run: each figure summed over its workers (a figure no
    worker gave is null); `history_size` as they are configured, `uptime` the oldest's."""
    rows = [
        {key: stats.get(key) for key in IDLE_SUMMED} | {"connections": connection_count(stats)}
        for stats in workers.values()
    ]
    figures: dict[str, Any] = {key: total(rows, key) for key in IDLE_SUMMED}
    uptimes = [s["uptime"] for s in workers.values() if isinstance(s.get("uptime"), int | float)]
    return figures | {
        "history_size": next(iter(workers.values())).get("history_size"),
        "uptime": max(uptimes, default=None),
        "workers": len(workers),
    }


class TimeUp(Exception):
    """--max-minutes passed in the middle of a step."""


def crowd_channel(run_id: str) -> str:
    return f"bi-{run_id}"


def own_channel(run_id: str, node: int, n: int) -> str:
    return f"bi-{run_id}.{node}.{n}"


def probe_channel(settings: Settings) -> str:
    base = crowd_channel(settings.run_id)
    return base if settings.test == "subscribers" else f"{base}.probe"


class Controller:
    def __init__(
        self,
        settings: Settings,
        host: str,
        book: StepBook,
        distributed: bool,
        on_publish: PublishHook | None = None,
        on_churn: DropHook | None = None,
    ) -> None:
        self.settings = settings
        self.host = host
        self.endpoint = Endpoint.parse(host)
        self.book = book
        self.distributed = distributed
        self.counts = settings.counts()
        self.target = 0
        """Subscribers the load shape asks for: none until the server's baseline is read (the
        run line), then each step's count."""
        self.finished = False
        self.ended = False
        self.points: list[Point] = []  # every step written, for the verdict
        self.writer = ResultsWriter(settings.out)
        self.label = settings.label or f"{settings.test}/{settings.transport}"
        self.admin_headers = (
            {"Authorization": f"Bearer {settings.publish_key}"} if settings.publish_key else {}
        )
        self.publisher = Publisher(self.endpoint, settings.publish_key, on_publish)
        self.server = ServerWorkers(self.endpoint, self.admin_headers)
        self.probe: ProbeProcess | None = None
        self.started = time.time()
        self.deadline = time.monotonic() + settings.max_minutes * 60
        self.greenlet: gevent.Greenlet | None = None
        self.churner = Churner(settings.churn, self._held, on_churn or (lambda shares: None))
        self.faults = {fault.step: fault.command for fault in settings.faults}

    def _held(self) -> dict[str, int]:
        return {name: node.established for name, node in self.book.nodes.items()}

    def start(self) -> None:
        self.greenlet = gevent.spawn(self._run)

    def _common(self) -> dict[str, Any]:
        s = self.settings
        return {"run_id": s.run_id, "test": s.test, "transport": s.transport, "label": self.label}

    def _run(self) -> None:
        reason, message = "interrupted", "the controller stopped unexpectedly"
        try:
            problem = server_problem(self.endpoint, self.host, self.admin_headers)
            self._header(idle=problem is None)
            if problem is None:
                self._start_probe()
                reason, message = self._steps()
            else:
                reason, message = self._invalid_start(problem)
        except TimeUp:
            reason, message = "time", f"stopped after --max-minutes {self.settings.max_minutes:g}"
        except Exception as exc:
            message = f"the controller failed: {exc!r}"
            raise
        finally:
            self.end(reason, message)

    def refuse(self, problem: str) -> str:
        """Record a run that cannot start (step 1 invalid) without Locust; returns why."""
        self._header(idle=False)
        reason, message = self._invalid_start(problem)
        self.end(reason, message, announce=False)
        return message

    def _invalid_start(self, problem: str) -> tuple[str, str]:
        now = time.time()
        empty = Latencies().summary()
        self._write_step(
            {
                "kind": "step",
                **self._common(),
                "step": 1,
                "subscribers": 0,
                "target": self.counts[0],
                "channels": 0,
                "messages": 0,
                "expected": 0,
                "delivered": 0,
                "lost": 0,
                "duplicates": 0,
                "latency": {"publish": empty, "fanout": empty, "e2e": empty},
                "probe": None,
                "invalid": problem,
                "ceiling": self.settings.ceiling,
                "started": now,
                "ended": now,
            }
        )
        return "invalid", f"step 1 invalid: {problem}"

    def end(self, reason: str, message: str, announce: bool = True) -> None:
        """Write the end line once, print why (unless the caller will), let the shape stop."""
        if self.ended:
            return
        self.ended = True
        answer = verdict(self.points, self.settings.ceiling, reason)
        self.writer.write(
            {
                "kind": "end",
                **self._common(),
                "reason": reason,
                "message": message,
                "steps": len(self.points),
                "verdict": answer,
                "ended": time.time(),
            }
        )
        if announce and not os.environ.get(RUNNER_ENV):  # else pushserver-burnin says it last
            print(f"burn-in finished ({reason}): {message}", flush=True)
            print(f"results: {self.writer.path}", flush=True)
            print(f"verdict: {answer}", flush=True)
        self.publisher.close()
        if self.probe is not None:
            self.probe.stop()
        self.finished = True

    def abort(self, why: str) -> None:
        """Locust is stopping from outside (web UI stop, SIGTERM, workers lost)."""
        if self.greenlet is not None and not self.greenlet.dead:
            self.greenlet.kill(block=False)
        self.end("interrupted", why)

    def _header(self, idle: bool) -> None:
        """The run line; with `idle`, the server's RSS (all its workers') before any
        subscriber (the baseline of the charts' memory per subscriber)."""
        if idle:
            self.server.find()
        workers = self.server.read() if idle else None
        settings = self.settings.as_dict()
        settings.pop("publish_key")
        self.writer.write(
            {
                "kind": "run",
                **self._common(),
                "tool": TOOL,
                "format": FORMAT,
                "host": self.host,
                "command": recorded_command(),
                "settings": settings,
                "machine": machine_info(),
                "started": self.started,
                "server_idle": idle_figures(workers) if workers else None,
            }
        )

    def _write_step(self, record: dict[str, Any]) -> None:
        self.writer.write(record)
        self.points.append(Point.from_line(record))

    def _start_probe(self) -> None:
        if self.settings.probe:
            self.probe = ProbeProcess(
                self.host, self.settings.transport, probe_channel(self.settings), self.book
            )
            self._wait(self.probe.subscribed.is_set, 30.0)

    def _all_established(self) -> bool:
        """Every subscriber of the step being ramped has its cursor."""
        return self.book.established() >= self.target

    def _wait(self, done: Callable[[], bool], timeout: float) -> bool:
        """Poll until done() or timeout; raise TimeUp past the run's deadline."""
        until = time.monotonic() + timeout
        while not done():
            now = time.monotonic()
            if now >= self.deadline:
                raise TimeUp
            if now >= until:
                return False
            gevent.sleep(_POLL)
        return True

    def _snapshot(self) -> Snapshot:
        clocks = {
            name: Clock(node.cpu_seconds, node.cpu_wait, node.time)
            for name, node in self.book.nodes.items()
        }
        if self.distributed:
            clocks["master"] = own_clock(os.getpid())
        workers = self.server.read()
        server_clocks = {pid: own_clock(pid) for pid in workers if pid} if self.server.local else {}
        return Snapshot(time.time(), workers, server_clocks, clocks)

    def _steps(self) -> tuple[str, str]:
        s = self.settings
        previous, step = 0, 0
        for count in self.counts:
            self.target = count
            spawning = (count - previous) / s.spawn_rate
            if time.monotonic() + spawning + s.step_seconds > self.deadline:
                raise TimeUp  # the step could not finish in time
            self._wait(self._all_established, 30.0 + 2 * spawning)
            previous = count
            for repeat in range(1, s.repeats + 1):
                step += 1
                record = self._one_step(step, count) | {"repeat": repeat}
                record["side"] = step_side(Point.from_line(record))
                self._write_step(record)
                print(progress_line(record), flush=True)
                stop = self._verdict(record)
                if stop is not None:
                    return stop
        return "max", f"reached --max {s.max} subscribers"

    def _one_step(self, step: int, target: int) -> dict[str, Any]:
        s = self.settings
        subscribers = self.book.established()
        if s.test == "subscribers":
            channels, uncounted, per_message = [crowd_channel(s.run_id)], 0, subscribers
        else:
            channels = list(self.book.channels)
            uncounted, per_message = 0, 1
            if self.probe is not None:
                channels.append(probe_channel(s))
                uncounted = 1
        first = self._snapshot()
        started = time.time()
        fault = FaultRun(self.faults[step]) if step in self.faults else None
        self.churner.start()
        try:
            result = self.publisher.publish_step(step, channels, uncounted, s.rate, s.step_seconds)
            expected = result.messages * per_message
            counts = self.book.step(step)
            drained = self._wait(
                lambda: counts.delivered >= expected and self._probe_done(step, result),
                s.ceiling + DRAIN_GRACE,
            )
            if fault is not None:
                fault.wait(max(0.0, self.deadline - time.monotonic()))
            gevent.sleep(0.3)  # one more round of worker reports, for late duplicates
        finally:
            churn_asked = self.churner.stop()
            if fault is not None:
                fault.stop()
        last = self._snapshot()
        probe = self.book.probe.get(step) if self.probe is not None else None
        problems = []
        if subscribers < target:
            problems.append(f"only {subscribers} of {target} subscribers connected")
        if result.errors and fault is None:  # during a fault, failed publishes are its effect
            problems.append(f"{result.errors} publish requests failed, first {result.first_error}")
        if not expected and not problems:
            problems.append("no delivery was expected: nothing was published")
        return {
            "kind": "step",
            **self._common(),
            "step": step,
            "subscribers": subscribers,
            "target": target,
            "channels": len(channels) - uncounted,
            "messages": result.messages,
            "expected": expected,
            "delivered": counts.delivered,
            "lost": max(0, expected - counts.delivered),
            "duplicates": counts.duplicates,
            "reconnects": counts.reconnects,
            "missed": counts.missed,
            "churned": counts.churned,
            "churn_asked": churn_asked,
            "drained": drained,
            "latency": {
                "publish": result.round_trip.summary(),
                "fanout": counts.fanout.summary(),
                "e2e": counts.all_e2e().summary(),
            },
            "probe": None
            if probe is None
            else {"fanout": probe.fanout.summary(), "e2e": probe.e2e.summary()},
            "windows": counts.timeline(),
            "publisher": {
                "rate_kept": result.kept_rate,
                "errors": result.errors,
                "rounds": result.ticks,
                "late": result.late.summary(with_histogram=False),
            },
            "fault": None if fault is None else fault.record(result, s.rate, step, self.book.first),
            "server": server_figures(first, last),
            "loadgen": loadgen_figures(first, last, counts.delivered),
            "invalid": "; ".join(problems) or None,
            "ceiling": s.ceiling,
            "started": started,
            "ended": time.time(),
        }

    def _probe_done(self, step: int, result: PublishResult) -> bool:
        if self.probe is None or self.probe.proc.poll() is not None:
            return True  # no probe, or it died: nothing more will come from it
        return self.book.probe_step(step).delivered >= result.ticks - result.errors

    def _verdict(self, record: dict[str, Any]) -> tuple[str, str] | None:
        s = self.settings
        if record["invalid"]:
            return "invalid", f"step {record['step']} invalid: {record['invalid']}"
        worst = record["latency"]["e2e"]["worst"]
        where = f"step {record['step']}, {record['subscribers']} subscribers"
        if worst is not None and worst > s.ceiling:
            return "ceiling", (
                f"worst end-to-end latency {worst:.3f} s passed the ceiling {s.ceiling:g} s "
                f"({where})"
            )
        late = record["lost"] - record["missed"]
        if late > 0:
            return "ceiling", (
                f"{late} deliveries still missing {s.ceiling + DRAIN_GRACE:g} s after the step: "
                f"later than the ceiling {s.ceiling:g} s or lost ({where})"
            )
        if record["publisher"]["rate_kept"] < PUBLISHER_MIN_RATE:
            kept = record["publisher"]["rate_kept"] * 100
            return "publisher", (
                f"the publisher kept only {kept:.0f}% of --rate {s.rate:g}/s ({where})"
            )
        return None
