"""pushserver-burnin: run the burn-in headless (one Locust process, or a master and K workers),
or `pushserver-burnin worker --master HOST:PORT` to join a master from another machine.

Every input is checked before anything starts (one line naming the setting, exit 2). The run is
bounded twice: the controller stops by itself after --max-minutes, and this runner terminates
every process it started (SIGTERM, then SIGKILL) a little after that. What the run found is
printed last, after Locust's own summary: why it stopped, then the verdict.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

import pushserver_burnin
from pushserver.usage import OneLineParser
from pushserver_burnin.controller import Controller
from pushserver_burnin.preflight import server_problem
from pushserver_burnin.results import RESULTS_NAME, read_run
from pushserver_burnin.settings import (
    COMMAND_ENV,
    RUNNER_ENV,
    SOURCE_IP_ENV,
    TESTS,
    Settings,
    add_cli_arguments,
    build,
    locust_arguments,
    new_run_id,
    shown_command,
)
from pushserver_burnin.tally import StepBook
from pushserver_measure import checks
from pushserver_measure.extras import install_hint
from pushserver_measure.ports import free_port

PROG = "pushserver-burnin"

LOCUSTFILE = Path(pushserver_burnin.__file__).with_name("locustfile.py")
_MARGIN = 120.0  # seconds past --max-minutes before processes are terminated
_JOIN_WAIT = 600  # seconds the master waits for workers from other machines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(
        prog=PROG,
        usage=f"%(prog)s {{{','.join(TESTS)}}} --host URL [options]\n"
        f"       %(prog)s worker --master HOST:PORT [--source-ip A]",
        description="Raise subscribers step by step until worst-case latency passes a ceiling. "
        "`pushserver-burnin worker --help`: join a master from another machine.",
    )
    parser.add_argument("test", choices=TESTS)
    parser.add_argument("--host", required=True, help="server URL, e.g. http://127.0.0.1:8080")
    add_cli_arguments(parser)
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="Locust worker processes started here, holding the subscribers; the master "
        "publishes (0: everything in one process, publisher among the subscribers, unless "
        "--remote-workers)",
    )
    parser.add_argument(
        "--remote-workers",
        type=int,
        default=0,
        help="workers that join from other machines (pushserver-burnin worker --master "
        "HOST:PORT); the run starts once all of them and --workers have joined",
    )
    parser.add_argument(
        "--master-bind-host",
        default="127.0.0.1",
        help="address the Locust master listens on for workers (0.0.0.0: every interface, "
        "for workers on other machines)",
    )
    parser.add_argument(
        "--master-bind-port",
        type=int,
        default=0,
        help="port the Locust master listens on (0: a free one, printed at the start)",
    )
    parser.add_argument("--no-charts", action="store_true", help="do not build the HTML report")
    return parser.parse_args(argv)


def parse_worker_args(argv: list[str]) -> argparse.Namespace:
    parser = OneLineParser(
        prog=f"{PROG} worker",
        description="Join a pushserver-burnin master as one more Locust worker holding "
        "subscribers; the master sends the settings.",
    )
    parser.add_argument("--master", required=True, metavar="HOST:PORT", help="the master")
    parser.add_argument(
        "--source-ip",
        default="",
        help="local address of this worker's subscriber sockets (default: the master's "
        "--source-ip setting)",
    )
    return parser.parse_args(argv)


def master_address(text: str) -> tuple[str, int]:
    """HOST:PORT (or [V6]:PORT) of a master; ValueError naming --master otherwise."""
    host, colon, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"--master must be HOST:PORT with a port in 1..65535, got {text!r}")
    return host, int(port)


def refusal(args: argparse.Namespace) -> str:
    """The first input that cannot work, as one line naming it ("" when all can)."""
    problem = checks.first(
        checks.http_url("--host", args.host),
        checks.at_least("--remote-workers", args.remote_workers, 0),
    )
    if not problem and not 0 <= args.master_bind_port <= 65535:
        problem = f"--master-bind-port must be 0..65535, got {args.master_bind_port}"
    if not problem and (args.workers or args.remote_workers):
        problem = checks.local_address("--master-bind-host", args.master_bind_host)
        if not problem and args.master_bind_port:
            problem = checks.local_address(
                "--master-bind-port", args.master_bind_host, args.master_bind_port
            )
    if not problem and args.source_ip not in ("auto", "none"):
        problem = checks.local_address("--source-ip", args.source_ip)
    return problem or checks.writable_dir("--out", args.out)


def _stop(procs: list[subprocess.Popen[bytes]], grace: float, signum: int = signal.SIGTERM) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signum)
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


LOCUST = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "WARNING"]


def worker_command(host: str, port: int) -> list[str]:
    return [*LOCUST, "--worker", "--master-host", host, "--master-port", str(port)]


def run_locust(args: argparse.Namespace, settings: Settings, command: str) -> None:
    out = Path(args.out)
    master = [
        *LOCUST,
        "--headless",
        "--only-summary",
        "--host",
        args.host,
        "--json-file",  # written once at the end; --csv races its own writer at exit
        str(out / "locust_stats"),
        *locust_arguments(settings),
    ]
    workers: list[list[str]] = []
    expected = args.workers + args.remote_workers
    if expected > 0:
        bind, port = args.master_bind_host, args.master_bind_port or free_port()
        master += [
            "--master",
            "--master-bind-host",
            bind,
            "--master-bind-port",
            str(port),
            "--expect-workers",
            str(expected),
            "--expect-workers-max-wait",
            str(_JOIN_WAIT if args.remote_workers else 60),
        ]
        local = "127.0.0.1" if bind in ("0.0.0.0", "::") else bind
        workers = [worker_command(local, port) for _ in range(args.workers)]
        print(f"{PROG}: Locust master on {bind}:{port}", flush=True)
        if args.remote_workers:
            print(
                f"{PROG}: waiting for {args.remote_workers} more worker(s): "
                f"pushserver-burnin worker --master HOST:{port}",
                flush=True,
            )
    env = dict(os.environ)
    env[COMMAND_ENV] = command
    env[RUNNER_ENV] = "1"
    if settings.publish_key:
        env["PUSHSERVER_PUBLISH_KEY"] = settings.publish_key
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stopped)
    master_proc = subprocess.Popen(master, stdin=subprocess.DEVNULL, env=env)
    worker_procs = [subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=env) for cmd in workers]
    try:
        master_proc.wait(timeout=args.max_minutes * 60 + _MARGIN + _JOIN_WAIT)
    except subprocess.TimeoutExpired:
        print(f"{PROG}: the run overran --max-minutes; terminating", flush=True)
        _stop([master_proc], 15)
    except Stopped as stopped:
        name = str(stopped)
        print(f"{PROG}: {name}: stopping the run", flush=True)
        # the master is told with the same signal, so its end line names the right one
        _stop([master_proc], 15, getattr(signal, name))
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


def worker_main(argv: list[str]) -> int:
    """Join a master as one more Locust worker until the master ends the run."""
    args = parse_worker_args(argv)
    try:
        host, port = master_address(args.master)
    except ValueError as exc:
        print(f"{PROG} worker: {exc}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    if args.source_ip:
        problem = checks.local_address("--source-ip", args.source_ip)
        if problem:
            print(f"{PROG} worker: {problem}", file=sys.stderr)
            return 2
        env[SOURCE_IP_ENV] = args.source_ip
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stopped)
    proc = subprocess.Popen(worker_command(host, port), stdin=subprocess.DEVNULL, env=env)
    try:
        return proc.wait()
    except Stopped:
        _stop([proc], 15)
        return 1


def finish(args: argparse.Namespace, results: Path, run_id: str) -> int:
    """After Locust has printed its summary: the report, why the run stopped, the verdict last."""
    lines = read_run(results, run_id) if results.exists() else []
    end = next((line for line in lines if line["kind"] == "end"), None)
    steps = [line for line in lines if line["kind"] == "step"]
    if end is None:
        print(f"{PROG}: run {run_id} did not finish (no end line)", file=sys.stderr, flush=True)
        return 1
    if not steps:
        why = f"{PROG}: no step finished ({end['reason']}: {end['message']}); nothing to chart"
        print(why, file=sys.stderr, flush=True)
        return 1
    if not args.no_charts:
        build_charts(results, Path(args.out))
    print(f"burn-in finished ({end['reason']}): {end['message']}", flush=True)
    print(f"results: {results}", flush=True)
    if end["reason"] == "invalid":
        print(f"{PROG}: {end['message']}", file=sys.stderr, flush=True)
    print(f"verdict: {end['verdict']}", flush=True)
    return 1 if end["reason"] in ("interrupted", "invalid") else 0


def main(argv: list[str] | None = None) -> int:
    typed = sys.argv[1:] if argv is None else argv
    if typed[:1] == ["worker"]:
        return worker_main(typed[1:])
    args = parse_args(typed)
    args.run_id = args.run_id or new_run_id()
    try:
        settings = build(
            lambda attr: getattr(args, attr), not args.no_probe, args.workers, args.fault
        )
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    problem = refusal(args)
    if problem:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return 2
    results = Path(args.out) / RESULTS_NAME
    controller = Controller(settings, args.host, StepBook(), distributed=False)
    unreachable = server_problem(controller.endpoint, args.host, controller.admin_headers)
    if unreachable is not None:
        print(f"{PROG}: {controller.refuse(unreachable)}", file=sys.stderr, flush=True)
        return 1
    run_locust(args, settings, shown_command([PROG, *typed]))
    return finish(args, results, settings.run_id)


if __name__ == "__main__":
    sys.exit(main())
