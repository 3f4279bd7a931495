"""The burn-in locustfile: subscriber users, the step shape, and the wiring between processes.

Headless through `pushserver-burnin`, or with the web UI: `locust -f pushserver_burnin/locustfile.py
--host http://127.0.0.1:8080` (the settings are the --burnin-* custom arguments).
In distributed mode the publisher, the probe and the controller live on the master; workers
hold subscribers and report their per-step counts to the master every REPORT_INTERVAL.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
from argparse import Namespace
from collections.abc import Mapping
from typing import Any

import gevent
from locust import LoadTestShape, User, constant, events, runners, task
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from pushserver_burnin import churn
from pushserver_burnin.controller import Controller, crowd_channel, own_channel
from pushserver_burnin.settings import (
    SOURCE_IP_ENV,
    add_locust_arguments,
    from_locust_options,
    new_run_id,
)
from pushserver_burnin.subscribers import TRANSPORTS, Subscriber
from pushserver_burnin.tally import StepBook, Tally
from pushserver_measure.http11 import Endpoint
from pushserver_measure.tuning import quiet_gc, raise_open_files_limit

REPORT = "burnin_report"
CHURN = "burnin_churn"  # master to a subscriber process: drop this many subscribers
REPORT_INTERVAL = 0.25
WORKER_SILENCE = 30  # heartbeats (s) a worker may miss before the master drops it

raise_open_files_limit()
# A worker busy with a burst of deliveries, or starved of CPU on a shared machine, misses
# Locust's default 3 heartbeats and is dropped, which ends the test mid-step. That worker is
# exactly what a step must measure (as saturated), so the master waits longer for it.
runners.HEARTBEAT_LIVENESS = WORKER_SILENCE


class _DropSpawnRateWarning(logging.Filter):
    """Fast ramps are deliberate here (thousands of subscribers per step)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Your selected spawn rate is very high")


logging.getLogger("locust.runners").addFilter(_DropSpawnRateWarning())


class _State:
    """What this process knows about the run in progress."""

    def __init__(self) -> None:
        self.tally = Tally()
        self.book = StepBook()
        self.controller: Controller | None = None
        self.reporter: gevent.Greenlet | None = None
        self.fixed_run_id = ""
        self.channel_numbers = itertools.count()
        self.live: set[Subscriber] = set()  # this process's subscribers, for --churn


state = _State()


def _options(environment: Environment) -> Namespace:
    """Locust's parsed options: set whenever Locust runs from its command line, as here."""
    if environment.parsed_options is None:
        raise RuntimeError("the burn-in runs from Locust's command line (locust -f ...)")
    return environment.parsed_options


def _runner(environment: Environment) -> runners.Runner:
    if environment.runner is None:
        raise RuntimeError("the burn-in needs a running Locust runner")
    return environment.runner


def _host(environment: Environment) -> str:
    if not environment.host:
        raise RuntimeError("the burn-in needs the server's URL: --host http://HOST:PORT")
    return environment.host


@events.init_command_line_parser.add_listener
def _arguments(parser: Any) -> None:
    add_locust_arguments(parser)


@events.init.add_listener
def _init(environment: Environment, **_: Any) -> None:
    quiet_gc()
    runner = environment.runner
    if environment.parsed_options is not None:
        state.fixed_run_id = environment.parsed_options.burnin_run_id
    if runner is not None and not isinstance(runner, MasterRunner):
        runner.register_message(CHURN, lambda msg, **_: churn.drop(state.live, int(msg.data)))
    if runner is not None and not isinstance(runner, WorkerRunner):
        runner.register_message(REPORT, lambda msg, **_: state.book.merge(msg.node_id, msg.data))
        # Headless Locust installs its own SIGTERM handler only after a shape test ends, so
        # until then SIGTERM would kill the master without an end line and orphan the probe.
        for signum in (signal.SIGTERM, signal.SIGINT):
            gevent.signal_handler(signum, _terminated, environment, signum)


def _terminated(environment: Environment, signum: int) -> None:
    if state.controller is not None and not state.controller.finished:
        state.controller.abort(f"stopped by {signal.Signals(signum).name}")
    if environment.runner is not None:
        environment.runner.quit()


@events.test_start.add_listener
def _test_start(environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        return
    transport = _options(environment).burnin_transport

    def delivered(worst: float, deliveries: int) -> None:
        environment.events.request.fire(
            request_type="DELIVER",
            name=transport,
            response_time=worst * 1000,
            response_length=deliveries,
            exception=None,
            context={},
        )

    def reconnecting(error: BaseException) -> None:
        environment.events.request.fire(
            request_type="RECONNECT",
            name=transport,
            response_time=0,
            response_length=0,
            exception=error,
            context={},
        )

    state.tally = Tally(delivered, reconnecting)
    state.channel_numbers = itertools.count()
    if state.reporter is not None:
        state.reporter.kill()
    state.reporter = gevent.spawn(_report_loop, environment)


def _report_loop(environment: Environment) -> None:
    while True:
        gevent.sleep(REPORT_INTERVAL)
        _runner(environment).send_message(REPORT, state.tally.take())


@events.test_stopping.add_listener
def _test_stopping(environment: Environment, **_: Any) -> None:
    if state.controller is not None and not state.controller.finished:
        runner = environment.runner
        if isinstance(runner, MasterRunner) and runner.worker_count <= 0:
            state.controller.abort("every Locust worker went missing (quit or stopped answering)")
        else:
            state.controller.abort("the run was stopped before it finished")


def _source_ip(environment: Environment, choice: str, endpoint: Endpoint) -> str | None:
    """Per-worker loopback source address, so each worker has its own ephemeral ports."""
    own = os.environ.get(SOURCE_IP_ENV)
    if own:
        return own
    if choice == "none":
        return None
    if choice != "auto":
        return choice
    runner = environment.runner
    if isinstance(runner, WorkerRunner) and endpoint.host == "127.0.0.1":
        return f"127.0.0.{2 + runner.worker_index % 250}"
    return None


class BurninSubscriber(User):
    """One subscriber on the chosen transport (pushserver_burnin.subscribers), held for the run."""

    wait_time = constant(0)

    @task
    def subscribe(self) -> None:
        options = _options(self.environment)
        endpoint = Endpoint.parse(_host(self.environment))
        run_id = options.burnin_run_id
        if options.burnin_test == "subscribers":
            channel = crowd_channel(run_id)
        else:
            runner = self.environment.runner
            node = runner.worker_index if isinstance(runner, WorkerRunner) else 0
            channel = own_channel(run_id, node, next(state.channel_numbers))
        source_ip = _source_ip(self.environment, options.burnin_source_ip, endpoint)
        subscriber = TRANSPORTS[options.burnin_transport](endpoint, channel, state.tally, source_ip)
        state.live.add(subscriber)
        try:
            subscriber.run()
        finally:
            state.live.discard(subscriber)


class BurninShape(LoadTestShape):
    """Holds each step's subscriber count until the controller has judged the step."""

    def reset_time(self) -> None:
        super().reset_time()
        if state.controller is not None and state.controller.finished:
            state.controller = None

    def tick(self) -> tuple[int, float] | None:
        if state.controller is None:
            if self.runner is None:
                raise RuntimeError("the load shape runs under a Locust runner")
            state.controller = _start_controller(self.runner.environment)
        if state.controller.finished:
            return None
        return state.controller.target, state.controller.settings.spawn_rate


def _start_controller(environment: Environment) -> Controller:
    options = _options(environment)
    options.burnin_run_id = state.fixed_run_id or new_run_id()  # sent to workers when spawning
    runner = environment.runner
    distributed = isinstance(runner, MasterRunner)
    workers = runner.worker_count if isinstance(runner, MasterRunner) else 0
    settings = from_locust_options(options, workers)
    state.book = StepBook()

    def published(seconds: float, size: int, error: BaseException | None) -> None:
        environment.events.request.fire(
            request_type="PUBLISH",
            name="/pub",
            response_time=seconds * 1000,
            response_length=size,
            exception=error,
            context={},
        )

    def dropping(shares: Mapping[str, int]) -> None:
        for node, count in shares.items():
            _runner(environment).send_message(CHURN, count, client_id=node)

    controller = Controller(
        settings, _host(environment), state.book, distributed, published, dropping
    )
    controller.start()
    return controller
