"""Experiment 9's `--client` and `--per-process`: what they take, and what they refuse before
anything starts."""

from __future__ import annotations

import pytest

from pushserver_bench.cli import MAX_PER_PROCESS, parse_args, refusal


def refused(*argv: str) -> str:
    args = parse_args(["--only", "9", *argv])
    clients = [c for c in args.client.split(",") if c]
    return refusal(args, [9], [], clients)


@pytest.mark.parametrize("clients", ["tuned", "plain", "tuned,plain", "plain,tuned", "tuned,"])
def test_both_measuring_clients_are_taken(clients: str) -> None:
    assert refused("--client", clients) == ""


@pytest.mark.parametrize("clients", ["fast", "tuned,kernel", "Plain"])
def test_an_unknown_client_is_refused(clients: str) -> None:
    assert refused("--client", clients) == "--client takes tuned,plain"


@pytest.mark.parametrize("n", [1, 5000, MAX_PER_PROCESS])
def test_subscribers_per_process_within_the_open_files(n: int) -> None:
    assert refused("--per-process", str(n)) == ""


@pytest.mark.parametrize("n", [0, -1, MAX_PER_PROCESS + 1])
def test_subscribers_per_process_beyond_them_are_refused(n: int) -> None:
    assert (
        refused("--per-process", str(n))
        == f"--per-process takes 1 to {MAX_PER_PROCESS} subscribers"
    )


def test_an_encoded_cursor_goes_with_pushservers_long_poll_only() -> None:
    assert refused("--encode-cursor") == ""
    expected = "--encode-cursor goes with --only 9 and a pushserver target (its cursor)"
    assert (
        refused("--encode-cursor", "--target", "nchan", "--url", "http://127.0.0.1:1") == expected
    )
