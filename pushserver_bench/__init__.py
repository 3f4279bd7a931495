"""`pushserver-bench`: the fixed experiments of the classic event-service and push benchmarks."""

from typing import NoReturn

from pushserver_measure.extras import run


def main() -> NoReturn:
    """`pushserver-bench`; one line instead of a traceback when the bench extra is missing."""
    run("pushserver-bench", "pushserver_bench.cli", "bench", ("psutil",))
