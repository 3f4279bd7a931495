"""Redis that comes back from its own files behind what it acknowledged (an RDB snapshot older
than its last writes, AOF's last second) hands out ids again that nodes already delivered. The
lineage stamp (`scripts.LINEAGE_LUA`) ends the channel's epoch first, so subscribers are told
by an epoch gap; before it, the ids were reused and the repeats dropped as already seen.

A real pushserver process and a real redis-server with RDB persistence on loopback.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import aiohttp

from pushserver.launcher import ServerProcess

from ...redis_fixture import running
from ...wire import publish, streaming, take
from .test_redis_broker import ids, node_args, wait_until


async def test_redis_back_from_an_older_snapshot_ends_the_epoch_instead_of_reusing_ids(
    server_factory: Callable[..., ServerProcess],
) -> None:
    with running("--save", "3600 1") as redis_server:
        node = server_factory(*node_args(redis_server))
        async with aiohttp.ClientSession() as s:
            subs = await streaming(s, node.url, "saved")
            for n in range(3):
                await publish(s, node.url, "saved", f"a{n}")
            with redis_server.client() as admin:
                admin.save()  # the snapshot holds ids 1-3
            acked = [(await publish(s, node.url, "saved", f"a{n}"))["id"] for n in range(3, 5)]
            assert acked == [4, 5]
            for sub in subs:
                assert ids(await take(sub, 5)) == [1, 2, 3, 4, 5], sub.transport
            epoch = subs[0].cursor

            redis_server.stop(signal.SIGKILL)
            redis_server.start(redis_server.port)  # from its snapshot: last id 3, same epoch
            with redis_server.client() as admin:
                assert admin.hget("pushserver:m:saved", "i") == b"3"

            async def healthy() -> bool:
                async with s.get(f"{node.url}/healthz") as r:
                    return r.status == 200

            await wait_until(healthy, "the node back on Redis")
            after = [await publish(s, node.url, "saved", f"b{n}") for n in range(3)]
            assert [m["id"] for m in after] == [1, 2, 3]  # a new epoch, not ids 4, 5, 6 again
            for sub in subs:
                got = await take(sub, 4)
                assert got[0]["type"] == "gap" and got[0]["reason"] == "epoch", sub.transport
                assert [e["data"] for e in got[1:]] == ["b0", "b1", "b2"], sub.transport
            assert subs[0].cursor != epoch
