"""`pushserver` as an operator meets it: every mistake is one line naming the flag, exit 2.

Each case is a real `python -m pushserver` process; none gets as far as listening.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from pushserver.launcher import ServerProcess

SHORT_SECRET = "sesame"
STRONG_SECRET = "s" * 32


def pushserver(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PUSHSERVER_")}
    return subprocess.run(
        [sys.executable, "-m", "pushserver", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **(env or {})},
    )


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert result.returncode == 2, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["--port", "70000"], {}, ["pushserver: error: --port must be 0..65535, got 70000"]),
        (["--port", "-1"], {}, ["--port must be 0..65535"]),
        (["--history-size", "-5"], {}, ["--history-size must be at least 1, got -5"]),
        (["--max-connections", "0"], {}, ["--max-connections must be at least 1"]),
        (["--heartbeat", "nan"], {}, ["--heartbeat must be a number"]),
        (["--default-timeout", "500"], {}, ["--default-timeout must be 0..--max-timeout"]),
        (["--loop", "fast"], {}, ["--loop", "uvloop"]),
        (["--no-such-flag"], {}, ["--no-such-flag"]),
        (["--redis", "localhost:6379"], {}, ["--redis must be a redis://"]),
        (["--redis-replicas", "-2"], {}, ["--redis-replicas must be -1", "or 0 or more"]),
        (["--redis", "redis://h:99999/0"], {}, ["--redis must be"]),
        (["--redis", "redis+cluster://a:1;b:2"], {}, ["--redis must be redis+cluster://HOST:PORT"]),
        (
            [],
            {"PUSHSERVER_REDIS": "redis+sentinel://:pw@s:26379"},
            ["PUSHSERVER_REDIS must be redis+sentinel://", "(MASTER", "//:***@s:26379'"],
        ),
        (["--trusted-proxies", "10.0.0.0/33"], {}, ["--trusted-proxies must be"]),
        (["--gc-threshold", "1,2"], {}, ["--gc-threshold must be three integers"]),
        (["--max-line-size", "8190"], {}, ["--max-line-size must be at least 36748", "64"]),
        ([], {"PUSHSERVER_MAX_FIELD_SIZE": "8190"}, ["PUSHSERVER_MAX_FIELD_SIZE must be at least"]),
        (["--max-head-bytes", "32768"], {}, ["--max-head-bytes must be at least --max-line-size"]),
        (["--host", "256.0.0.1", "--port", "0"], {}, ["cannot listen on --host 256.0.0.1"]),
        ([], {"PUSHSERVER_PORT": "70000"}, ["PUSHSERVER_PORT must be 0..65535"]),
        ([], {"PUSHSERVER_MAX_CONNECTIONS": "lots"}, ["PUSHSERVER_MAX_CONNECTIONS", "integer"]),
        ([], {"PUSHSERVER_ACCESS_LOG": "maybe"}, ["PUSHSERVER_ACCESS_LOG must be true or false"]),
        (["token", "--channels", "a", "--ttl", "-1", "--secret", STRONG_SECRET], {}, ["--ttl"]),
        (["token", "--channels", "a", "--ttl", "soon"], {}, ["--ttl"]),
        (["token", "--channels", "bad name", "--secret", STRONG_SECRET], {}, ["--channels"]),
        (["token", "--channels", "a"], {}, ["--secret", "PUSHSERVER_SUBSCRIBE_SECRET"]),
    ],
)
def test_bad_flag_or_environment_is_one_line(args, env, words):
    assert_one_line_error(pushserver(*args, env=env), *words)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (b"port = 70000\n", ["--port (config file", "must be 0..65535"]),
        (b'heartbeat = "often"\n', ["--heartbeat (config file", "must be a number"]),
        (b"history_size = true\n", ["--history-size (config file", "must be an integer"]),
        (b"history_size = 2.5\n", ["--history-size (config file", "must be an integer"]),
        (b"colour = 1\n", ["--config:", "unknown setting 'colour'"]),
        (b"port = \n", ["--config:", "is not valid TOML"]),
        (b"\xff\xfe = 1\n", ["--config:", "is not valid TOML"]),
        (b"pushserver = 5\n", ["--config:", "[pushserver] must be a table"]),
        (
            b'redis = "rediss+cluster://h:1/3"\n',
            ["--redis (config file", "must be rediss+cluster://", "database 0 only"],
        ),
    ],
)
def test_bad_config_file_is_one_line(tmp_path: Path, text: bytes, words: list[str]):
    config = tmp_path / "push.toml"
    config.write_bytes(text)
    assert_one_line_error(pushserver("--config", str(config)), *words)


def test_missing_config_file_is_one_line(tmp_path: Path):
    result = pushserver("--config", str(tmp_path / "absent.toml"))
    assert_one_line_error(result, "--config: cannot read", "No such file")


def test_help_reads_right():
    out = pushserver("--help").stdout
    usage = out.split("\n\n", 1)[0]
    assert usage.startswith("usage: pushserver [options]")
    assert "pushserver token" in usage
    for shown in (
        "--max-connections-per-ip N",
        "--max-channels-per-subscription N",
        "--loop {uvloop,asyncio}",
        "--port PORT",
        "--redis URL",
        "--heartbeat SECONDS",
        "--max-buffer-bytes BYTES",
        "--trusted-proxies ADDRESSES",
    ):
        assert shown in out, shown
    token_help = pushserver("token", "--help").stdout
    assert "--ttl SECONDS" in token_help and "(default 3600)" in token_help


def test_short_secret_is_said_once_in_own_words_never_by_pyjwt():
    token = pushserver("token", "--channels", "news", "--secret", SHORT_SECRET)
    assert token.returncode == 0 and token.stdout.count(".") == 2
    assert token.stderr.strip().splitlines() == [
        f"pushserver token: warning: the secret is {len(SHORT_SECRET)} bytes, shorter than 32: "
        "a short secret can be guessed and then anyone can mint subscribe tokens; use 32 random "
        "bytes or more (openssl rand -hex 32)"
    ]
    with ServerProcess(["--subscribe-secret", SHORT_SECRET]) as srv:
        url = f"{srv.url}/lp/news?timeout=0&token={token.stdout.strip()}"
        for _ in range(2):  # the first token check is where PyJWT would warn
            with urllib.request.urlopen(url, timeout=30) as response:
                assert response.status == 200
    assert srv.log.count("--subscribe-secret is 6 bytes, shorter than 32") == 1
    assert "InsecureKeyLengthWarning" not in srv.log + token.stderr
    assert "site-packages" not in srv.log + token.stderr


def test_default_max_connections_fits_the_open_file_limit():
    with ServerProcess() as srv:
        pass
    assert "exceeds what the open-file limit allows" not in srv.log
    assert "WARNING" not in srv.log
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no open-file hard limit: nothing an explicit value could exceed")
    with ServerProcess(["--max-connections", str(hard)]) as srv:
        pass
    assert f"--max-connections {hard} exceeds what the open-file limit allows" in srv.log
