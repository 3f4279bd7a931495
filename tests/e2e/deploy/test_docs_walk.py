"""Every command README.md, docs/burnin.md and docs/charts.md show, run as written after the
README's install, in a plain shell (no virtualenv activated, the venv's bin not on PATH).

Each file is walked in a scratch directory that looks like the repository's (`.venv` is this
test's environment, `pushserver_burnin/` the package), so nothing lands in the tree. What is
changed from the text, and why, is all in MAPPING below: ports, placeholders, and sizes small
enough for a test. A command that exits non-zero, a server that never answers, or a held
subscription that never receives what the next commands publish fails the walk.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from pushserver.launcher import ServerProcess
from pushserver_measure.ports import free_port

ROOT = Path(__file__).resolve().parents[3]
WALKED = ["README.md", "docs/burnin.md", "docs/charts.md"]
BURNIN_SMALL = "--start 2 --step 2 --max 4 --step-seconds 1 --rate 5 --max-minutes 1"
LOCUST_SMALL = BURNIN_SMALL.replace("--", "--burnin-")  # the same, as Locust custom arguments
LOCUST_MASTER = "--master-bind-host 127.0.0.1 --master-bind-port {mport}"
COMMAND_TIMEOUT = 240.0

MAPPING: list[tuple[str, str, str]] = [
    # (pattern, replacement, why); {port}, {mport}, {wport}, {rport} are free loopback ports
    (r"127\.0\.0\.1:8080|SERVER:8080", "127.0.0.1:{port}", "the server on a free port"),
    (r"--port 8080", "--port {port}", "the server on a free port"),
    (r"^(\.venv/bin/pushserver)$", r"\1 --port {port}", "its default port 8080, moved"),
    (r"\bMASTER\b", "127.0.0.1", "the Locust master runs here"),
    (r"cursor=CURSOR", "cursor={cursor}", "the last cursor the stream above printed"),
    (r"timeout=30\b", "timeout=1", "a long-poll that has nothing new returns sooner"),
    (r"^(\.venv/bin/pushserver-burnin (?!worker).*)$", rf"\1 {BURNIN_SMALL}",
     "small steps (last wins)"),
    (r"--master-bind-host 0\.0\.0\.0", "--master-bind-host 127.0.0.1", "listen on loopback only"),
    (r"\b5557\b", "{rport}", "pushserver-burnin's master on a free port of its own"),
    (r"--remote-workers 2", "--remote-workers 1", "one load machine: the worker line runs once"),
    (r"THIS_MACHINES_ADDRESS", "127.0.0.7", "a loopback address of its own"),
    (r"^(\.venv/bin/pushserver-bench --quick)$", r"\1 --only 1", "test_bench.py runs all"),
    (r"^(\.venv/bin/locust .*--master .*)$", rf"\1 {LOCUST_SMALL} {LOCUST_MASTER}",
     "small steps; a free port between master and worker"),
    (r"^(\.venv/bin/locust .*--worker .*)$", r"\1 --master-port {mport}", "the master's port"),
    (r"^(\.venv/bin/locust (?!.*--(?:master|worker)).*)$",
     r"\1 --web-host 127.0.0.1 --web-port {wport}", "the web UI on loopback, a free port"),
]  # fmt: skip
"""`$URL` is set in the environment to the server's URL, as its `listening on` line gives it."""

SKIPPED = {
    "./scripts/test.sh": "runs the whole suite, this test included",
    './scripts/test.sh -m "not slow"': "runs the suite but for the slow files",
    "./scripts/test.sh tests/unit": "runs the unit tests, which the suite runs anyway",
}


def code_blocks(path: Path) -> Iterator[tuple[str, str]]:
    """(language, text) of each fenced block."""
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", path.read_text(), re.M | re.S):
        yield match.group(1), match.group(2)


def commands(path: Path) -> list[str]:
    """The shell lines of the `sh` blocks (continuations joined, comments dropped) and each
    `python` block as one `.venv/bin/python -c` command."""
    found = []
    for language, text in code_blocks(path):
        if language == "python":
            found.append(f".venv/bin/python -c {shlex.quote(text)}")
        elif language == "sh":
            for line in text.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#.*$", "", line).strip()
                if line and not line.startswith("#"):
                    found.append(" ".join(line.split()))
    return found


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


@dataclass
class Walk:
    """One file's commands, run in order in one scratch directory."""

    cwd: Path
    port: int = field(default_factory=free_port)
    mport: int = field(default_factory=free_port)
    wport: int = field(default_factory=free_port)
    rport: int = field(default_factory=free_port)
    background: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        venv_bin = str(Path(sys.executable).parent)
        path = [p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin]
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        return {**env, "PATH": os.pathsep.join(path), "URL": self.url}

    def cursor(self) -> str:
        """The last cursor printed by a held subscription (NDJSON: `"cursor":"..."`)."""
        for _, _, out in reversed(self.background):
            found = re.findall(rb'"cursor":"([^"]+)"', out.read_bytes())
            if found:
                return found[-1].decode()
        raise AssertionError("no cursor printed by any held subscription before CURSOR")

    def mapped(self, command: str) -> str:
        for pattern, replacement, _why in MAPPING:
            command = re.sub(pattern, replacement, command)
        if "{cursor}" in command:
            wait_for("a cursor on the held stream", self._has_cursor)
            command = command.replace("{cursor}", self.cursor())
        ports = {"port": self.port, "mport": self.mport, "wport": self.wport, "rport": self.rport}
        for name, port in ports.items():
            command = command.replace(f"{{{name}}}", str(port))
        return command

    def _has_cursor(self) -> bool:
        try:
            return bool(self.cursor())
        except AssertionError:
            return False

    def held(self) -> int:
        with urllib.request.urlopen(f"{self.url}/stats", timeout=5) as response:
            return int(json.load(response)["connections"]["total"])

    def start(self, command: str) -> subprocess.Popen[bytes]:
        out = self.cwd / f"background-{len(self.background)}.out"
        with out.open("wb") as sink:
            proc = subprocess.Popen(
                ["bash", "-c", command],
                cwd=self.cwd,
                env=self.env(),
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.background.append((command, proc, out))
        return proc

    def run(self, written: str) -> None:
        install = re.match(
            r"python3 -m venv \.venv && \.venv/bin/pip install (.*?) && (.*)$", written
        )
        if install:
            check_install(shlex.split(install.group(1)))
            written = install.group(2)
        command = self.mapped(written)
        if command.endswith("&") or re.match(r"^\.venv/bin/pushserver --port \d+$", command):
            self.start(command.rstrip("& "))
            wait_for(f"the server of {written!r}", lambda: answers(f"{self.url}/healthz"))
        elif command.startswith("curl -N"):  # held until the server counts it, like a reader
            before = self.held()
            self.start(command)
            wait_for(f"{written!r} to be held", lambda: self.held() > before)
        elif "--master-bind-port" in command or "--worker" in command:
            self.start(command)  # the master runs the burn-in and ends; see finish()
        elif "--web-port" in command:
            self.start(command)
            wait_for("Locust's web UI", lambda: answers(f"http://127.0.0.1:{self.wport}/"))
        else:
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=self.cwd,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT,
            )
            assert done.returncode == 0, (
                f"{written!r} (run as {command!r}) exited {done.returncode}:\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )

    def finish(self) -> None:
        """Held subscriptions must have received a message; a Locust master must end by itself
        with status 0; everything else held is stopped."""
        for command, proc, out in self.background:
            if command.startswith("curl -N"):
                wait_for(f"a message on {command!r}", lambda out=out: b'"data"' in out.read_bytes())
            elif "--master-bind-port" in command:
                code = proc.wait(COMMAND_TIMEOUT)
                assert code == 0, f"{command!r} exited {code}:\n{out.read_text()[-3000:]}"
        self.stop()

    def stop(self) -> None:
        for _, proc, _ in reversed(self.background):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def check_install(arguments: list[str]) -> None:
    """The README's install line, checked against this environment (scripts/test.sh installs
    the same distributions, editable): each target is a project here, each extra it names exists
    and its requirements are installed, and so are the distributions those projects build."""
    for target in arguments:
        match = re.fullmatch(r"(.+?)(?:\[([\w,]+)\])?", target)
        assert match, target
        project = tomllib.loads((ROOT / match.group(1) / "pyproject.toml").read_text())["project"]
        extras = [e for e in (match.group(2) or "").split(",") if e]
        declared = project.get("optional-dependencies", {})
        assert set(extras) <= set(declared), f"{target}: no extra {set(extras) - set(declared)}"
        importlib.metadata.version(project["name"])  # raises when not installed
        for spec in [*project["dependencies"], *(r for e in extras for r in declared[e])]:
            requirement = Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate():
                importlib.metadata.version(requirement.name)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A directory shaped like the repository for the commands: `.venv` and the burn-in's
    locustfile where the docs say they are."""
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    (tmp_path / "pushserver_burnin").symlink_to(ROOT / "pushserver_burnin")
    return tmp_path


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results file of one small burn-in: the input docs/charts.md's commands name."""
    out = tmp_path_factory.mktemp("burnin")
    with ServerProcess() as srv:
        subprocess.run(
            [str(Path(sys.executable).with_name("pushserver-burnin")), "subscribers", "--host",
             srv.url, "--out", str(out), "--workers", "0", "--no-charts", *BURNIN_SMALL.split()],
            check=True, capture_output=True, timeout=COMMAND_TIMEOUT,
        )  # fmt: skip
    return out / "results.jsonl"


@pytest.mark.parametrize("document", WALKED)
def test_documented_commands_run_as_written(document: str, scratch: Path, one_run: Path) -> None:
    for name in re.findall(r"[\w/.-]*results\.jsonl", (ROOT / document).read_text()):
        if not (scratch / name).exists() and name != "burnin-results/results.jsonl":
            (scratch / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(one_run, scratch / name)
    walk = Walk(scratch)
    ran = []
    try:
        for command in commands(ROOT / document):
            if command in SKIPPED:
                continue
            walk.run(command)
            ran.append(command)
        walk.finish()
    finally:
        walk.stop()
    assert ran, f"no commands found in {document}"


def test_walk_extracts_every_shell_line() -> None:
    """The extraction the walk relies on: continuations joined, comments and prompts apart."""
    readme = commands(ROOT / "README.md")
    assert readme[0].startswith("python3 -m venv .venv && .venv/bin/pip install ")
    assert "curl -d hello http://127.0.0.1:8080/pub/news" in readme
    burnin = commands(ROOT / "docs/burnin.md")
    assert any(c.endswith("--ceiling 0.5 --max-minutes 10") for c in burnin)
    assert not any(c.startswith("#") or "\\" in c for c in burnin)
