"""pushserver-burnin: run the burn-in headless (one Locust process, or a master and K workers).

The run is bounded twice: the controller stops by itself after --max-minutes, and this runner
terminates every process it started (SIGTERM, then SIGKILL) a little after that.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

import pushserver_burnin
from pushserver_burnin.controller import Controller
from pushserver_burnin.preflight import server_problem
from pushserver_burnin.results import RESULTS_NAME, read_run
from pushserver_burnin.settings import (
    COMMAND_ENV,
    TESTS,
    Settings,
    add_cli_arguments,
    build,
    locust_arguments,
    new_run_id,
    shown_command,
)
from pushserver_burnin.tally import StepBook
from pushserver_measure.extras import install_hint
from pushserver_measure.ports import free_port

LOCUSTFILE = Path(pushserver_burnin.__file__).with_name("locustfile.py")
_MARGIN = 120.0  # seconds past --max-minutes before processes are terminated


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="pushserver-burnin",
        description="Raise subscribers step by step until worst-case latency passes a ceiling.",
    )
    parser.add_argument("test", choices=TESTS)
    parser.add_argument("--host", required=True, help="server URL, e.g. http://127.0.0.1:8080")
    add_cli_arguments(parser)
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="Locust worker processes holding the subscribers; the master publishes "
        "(0: everything in one process, publisher among the subscribers)",
    )
    parser.add_argument("--no-charts", action="store_true", help="do not build the HTML report")
    return parser.parse_args(argv)


def _stop(procs: list[subprocess.Popen[bytes]], grace: float) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Stopped(Exception):
    """SIGTERM or SIGINT reached the runner: stop the Locust processes, keep what they wrote."""


def _stopped(signum: int, _frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def run_locust(args: argparse.Namespace, settings: Settings, command: str) -> None:
    base = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "WARNING"]
    out = Path(args.out)
    master = [
        *base,
        "--headless",
        "--only-summary",
        "--host",
        args.host,
        "--csv",
        str(out / "locust"),
        *locust_arguments(settings),
    ]
    workers: list[list[str]] = []
    if args.workers > 0:
        port = free_port()
        master += [
            "--master",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            str(port),
            "--expect-workers",
            str(args.workers),
            "--expect-workers-max-wait",
            "60",
        ]
        workers = [
            [*base, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]
            for _ in range(args.workers)
        ]
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env[COMMAND_ENV] = command
    if settings.publish_key:
        env["PUSHSERVER_PUBLISH_KEY"] = settings.publish_key
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stopped)
    master_proc = subprocess.Popen(master, stdin=subprocess.DEVNULL, env=env)
    worker_procs = [subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=env) for cmd in workers]
    try:
        master_proc.wait(timeout=args.max_minutes * 60 + _MARGIN)
    except subprocess.TimeoutExpired:
        print("pushserver-burnin: the run overran --max-minutes; terminating", flush=True)
        _stop([master_proc], 15)
    except Stopped as signal_name:
        print(f"pushserver-burnin: {signal_name}: stopping the run", flush=True)
        _stop([master_proc], 15)
    finally:
        _stop(worker_procs, 15)


def build_charts(results: Path, out_dir: Path) -> None:
    try:
        from pushserver_charts import build_report  # imported lazily: charts is optional
    except ImportError:
        print(f"no HTML report, charts not installed: {install_hint('charts')}", flush=True)
        return
    report = build_report([results], out_dir)
    print(f"report: {report}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.run_id = args.run_id or new_run_id()
    try:
        settings = build(lambda attr: getattr(args, attr), not args.no_probe, args.workers)
    except ValueError as exc:
        print(f"pushserver-burnin: {exc}", file=sys.stderr)
        return 2
    results = Path(args.out) / RESULTS_NAME
    controller = Controller(settings, args.host, StepBook(), distributed=False)
    problem = server_problem(controller.endpoint, args.host, controller.admin_headers)
    if problem is not None:
        print(f"pushserver-burnin: {controller.refuse(problem)}", file=sys.stderr, flush=True)
        return 1
    typed = sys.argv[1:] if argv is None else argv
    run_locust(args, settings, shown_command(["pushserver-burnin", *typed]))
    lines = read_run(results, settings.run_id) if results.exists() else []
    end = next((line for line in lines if line["kind"] == "end"), None)
    if end is None:
        print(f"pushserver-burnin: run {settings.run_id} did not finish (no end line)", flush=True)
        return 1
    if not args.no_charts:
        build_charts(results, Path(args.out))
    if end["reason"] == "invalid":
        print(f"pushserver-burnin: {end['message']}", file=sys.stderr, flush=True)
    return 1 if end["reason"] in ("interrupted", "invalid") else 0


if __name__ == "__main__":
    sys.exit(main())
