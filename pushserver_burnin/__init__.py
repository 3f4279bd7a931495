"""The Locust burn-in suite: how many subscribers before latency passes a ceiling
(docs/burnin.md)."""

from typing import NoReturn

from pushserver_measure.extras import run

PROVIDES = ("locust", "gevent", "psutil", "hdrh", "numpy")


def main() -> NoReturn:
    """`pushserver-burnin`; one line instead of a traceback when the burnin extra is missing."""
    run("pushserver-burnin", "pushserver_burnin.cli", "burnin", PROVIDES)
