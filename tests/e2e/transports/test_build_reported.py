"""A server says which build it runs, the same as the one the tests import: in the test
command's compiled stage (scripts/test.sh) that proves the servers the tests start run the
wheel's compiled modules, not the checkout's source."""

from __future__ import annotations

import aiohttp

from pushserver.launcher import ServerProcess
from pushserver.monitor.compiled import build, compiled


async def test_stats_and_start_up_log_say_the_build_the_tests_import(server: ServerProcess) -> None:
    async with aiohttp.ClientSession() as s, s.get(f"{server.url}/stats") as r:
        stats = await r.json()
    assert stats["compiled"] is compiled()
    listening = [line for line in server.output if " listening on " in line and "worker" in line]
    assert listening and f", {build()})" in listening[0]
