"""Long failover runs (issue 34): publish and subscribe load through two pushserver nodes on a
real Redis Cluster or Sentinel set while its topology changes, then account for every message.

    .venv/bin/python scripts/failover_runs.py cluster     # 3 primary SIGKILLs (each revived),
                                                          # CLUSTER FAILOVER, a busy slot migrated
    .venv/bin/python scripts/failover_runs.py sentinel    # SENTINEL FAILOVER, a master SIGKILLed
    .venv/bin/python scripts/failover_runs.py sentinel --replicas 1 --only kill

`--replicas` is the Sentinel set's replicas per master (2 unless told), `--only` runs one of
the two Sentinel changes, `--sentinel-debug INFO-PERIOD=1000,PUBLISH-PERIOD=250` sets the
sentinels' `SENTINEL DEBUG` settings (see `tests/redis_sentinel.py`).

Publishers send keyed messages through both nodes and retry each (same key) until it is
acknowledged; NDJSON subscribers on both nodes follow every channel. Each gap a subscriber gets
is judged as it arrives, against Redis itself: honest when Redis holds none of the ids it says
cannot be delivered (in its epoch) and, for an epoch gap, no longer holds the epoch it ends. At
the end it prints, per run: acknowledged messages, those lost without a gap announcing them,
duplicates (a key or an id delivered twice), the gaps and how many were honest, and for each
change the seconds until each node delivered again a
message of an affected channel again (the longest pause in its deliveries of the channels on the
changed primary, from the change's start to 3 s after it ended; a node with none in that window
gets the time to its first one after). It exits 1 when anything was lost silently or delivered
twice, a gap was dishonest or could not be judged, or a node paused longer than `TARGET`. Kept
out of the test command (minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.sentinel import Sentinel
from redis.crc import key_slot
from redis.exceptions import RedisError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pushserver.broker.redis.scripts import Keys, TaggedKeys
from pushserver.launcher import ServerProcess
from tests.redis_cluster import NODE_TIMEOUT_MS, RedisClusterSet, running_cluster
from tests.redis_sentinel import MASTER_NAME, SentinelSet, running_sentinels

CHANNELS = 24
PUBLISHERS = 6
PAUSE = 0.01
"""Seconds each publisher rests between messages (about 300 publishes/s in all)."""
SETTLE = 3.0
DRAIN = 30.0
TARGET = NODE_TIMEOUT_MS / 1000 + 5
"""Seconds within which each node must deliver again: `cluster-node-timeout` + 5 s (issue 34;
the Sentinel set's `down-after-milliseconds` is the same 1 s)."""
JUDGE_TRIES = 100
"""Reads of Redis a gap's judgement may take (0.2 s apart: a failover under way refuses some)."""


def epoch_of(cursor: str) -> str:
    return cursor.rsplit(":", 2)[1]


def reader(kind: str, redis: Any) -> tuple[Any, Keys]:
    """A client that reads the Redis under test where the engines keep channels, and their keys."""
    if kind == "cluster":
        return RedisCluster(
            startup_nodes=[ClusterNode("127.0.0.1", node.port) for node in redis.nodes]
        ), TaggedKeys()
    sentinel = Sentinel([("127.0.0.1", s.port) for s in redis.sentinels])
    return sentinel.master_for(MASTER_NAME), Keys()


class Load:
    """Keyed publishers and NDJSON subscribers on every node; what each saw, with times."""

    def __init__(
        self, nodes: list[ServerProcess], channels: list[str], redis: tuple[Any, Keys]
    ) -> None:
        self.nodes, self.channels = nodes, channels
        self.redis = redis
        self.judged: list[bool | None] = []
        """Per gap seen: honest, dishonest, or None when Redis could not be read to tell."""
        self.judging: set[asyncio.Task[None]] = set()
        self.acked: dict[str, tuple[str, int, float, float]] = {}
        """key -> (channel, id, first attempt, acknowledged) (monotonic seconds)."""
        self.seen: dict[tuple[int, str], list[tuple[float, dict[str, Any]]]] = {}
        self.refused = 0
        self.running = True

    async def publisher(self, http: aiohttp.ClientSession, number: int) -> None:
        for n in itertools.count():
            if not self.running:
                return
            channel = self.channels[(number + n * PUBLISHERS) % len(self.channels)]
            key = f"p{number}-{n}"
            started = time.monotonic()
            for attempt in itertools.count():
                node = self.nodes[(number + n + attempt) % len(self.nodes)]
                try:
                    async with http.post(
                        f"{node.url}/pub/{channel}", json=key, headers={"Idempotency-Key": key}
                    ) as r:
                        body = await r.json()
                        if r.status == 201:
                            self.acked[key] = (channel, body["id"], started, time.monotonic())
                            break
                        self.refused += 1
                except (TimeoutError, aiohttp.ClientError):
                    self.refused += 1
                await asyncio.sleep(0.05)
            await asyncio.sleep(PAUSE)

    async def subscriber(self, http: aiohttp.ClientSession, at: int, channel: str) -> None:
        seen = self.seen.setdefault((at, channel), [])
        cursor = None
        while True:
            params = {} if cursor is None else {"cursor": cursor}
            try:
                async with http.get(f"{self.nodes[at].url}/stream/{channel}", params=params) as r:
                    if r.status != 200:
                        await asyncio.sleep(0.2)
                        continue
                    async for line in r.content:
                        if line.strip():
                            event = json.loads(line)
                            if event.get("type") == "gap":
                                task = asyncio.create_task(self.judge(channel, cursor, event))
                                self.judging.add(task)
                            cursor = event.get("cursor", cursor)
                            seen.append((time.monotonic(), event))
            except (TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.2)

    async def judge(self, channel: str, before: str | None, gap: dict[str, Any]) -> None:
        """Whether `gap` is honest, read as it arrives: Redis holds none of the ids `from`..`to`
        in the gap's epoch, and after an epoch gap no longer holds the epoch the subscriber was
        in. An id is never given again within an epoch, so what Redis holds now it held when
        the gap was sent (unless trimmed since: read at once to keep that unlikely)."""
        client, keys = self.redis
        meta, hist = keys.channel(channel)
        for _ in range(JUDGE_TRIES):
            try:
                epoch = await client.hget(meta, "e")
                held = await client.xrange(hist, f"{gap['from']}-0", f"{gap['to']}-0", count=1)
                break
            except RedisError:
                await asyncio.sleep(0.2)
        else:
            self.judged.append(None)
            return
        now = epoch.decode() if epoch else None
        honest = not (held and now == epoch_of(gap["cursor"]))
        if gap["reason"] == "epoch" and before is not None:
            honest = honest and now != epoch_of(before)
        self.judged.append(honest)

    def delivered(self) -> int:
        return sum(1 for events in self.seen.values() for _, e in events if "data" in e)

    def account(self) -> dict[str, Any]:
        lost, duplicates, gaps = 0, 0, []
        for (at, channel), events in self.seen.items():
            keys = [e["data"] for _, e in events if "data" in e]
            ids = [(e["cursor"].rsplit(":", 2)[1], e["id"]) for _, e in events if "data" in e]
            duplicates += len(keys) - len(set(keys)) + len(ids) - len(set(ids))
            gaps += [(at, channel, e) for _, e in events if e.get("type") == "gap"]
            got = set(keys)
            lost += sum(1 for k, (c, *_) in self.acked.items() if c == channel and k not in got)
        return {
            "acked": len(self.acked),
            "lost_without_gap": lost if not gaps else None,
            "missing": lost,
            "duplicates": duplicates,
            "gaps": [g[2] for g in gaps],
            "gaps_honest": self.judged.count(True),
            "gaps_dishonest": self.judged.count(False),
            "gaps_unjudged": self.judged.count(None),
        }

    def pause(self, since: float, until: float, affected: set[str]) -> list[float | None]:
        """Per node: the longest time between two deliveries of affected channels (or from
        `since` to the first) within [since, until]: how long the change left it deaf to them.
        A node that delivered none of them in that window gets the time from `since` to its
        first delivery of one after it (None if it never delivered one again)."""
        out: list[float | None] = []
        for at in range(len(self.nodes)):
            times = sorted(
                t
                for (n, c), events in self.seen.items()
                if n == at and c in affected
                for t, e in events
                if "data" in e and since <= t
            )
            within = [t for t in times if t <= until]
            steps = [b - a for a, b in zip([since, *within], within, strict=False)]
            later = [t - since for t in times[:1]]
            out.append(round(max(steps or later), 2) if times else None)
        return out


async def drive(
    nodes: list[ServerProcess],
    channels: list[str],
    changes: list[tuple[str, Callable[[], set[str]]]],
    redis: tuple[Any, Keys],
) -> dict[str, Any]:
    load = Load(nodes, channels, redis)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        subs = [
            asyncio.create_task(load.subscriber(http, at, c))
            for at in range(len(nodes))
            for c in channels
        ]
        await asyncio.sleep(SETTLE)  # subscriptions open
        pubs = [asyncio.create_task(load.publisher(http, n)) for n in range(PUBLISHERS)]
        await asyncio.sleep(SETTLE)
        report: list[dict[str, Any]] = []
        for name, change in changes:
            since = time.monotonic()
            affected = await asyncio.to_thread(change)
            report.append(
                {
                    "change": name,
                    "took": round(time.monotonic() - since, 2),
                    "since": since,
                    "affected": affected,
                }
            )
            await asyncio.sleep(SETTLE)
            report[-1]["until"] = time.monotonic()
            began = time.strftime("%H:%M:%S", time.gmtime(time.time() - report[-1]["took"]))
            print(
                f"{name} (from {began} UTC): {report[-1]['took']} s, {len(affected)} channels "
                "affected",
                flush=True,
            )
        load.running = False
        await asyncio.gather(*pubs)
        deadline = time.monotonic() + DRAIN
        while time.monotonic() < deadline and load.delivered() < 2 * len(load.acked):
            await asyncio.sleep(0.2)
        for task in subs:
            task.cancel()
        await asyncio.gather(*load.judging)
    await redis[0].aclose()
    result = load.account()
    result["refused_attempts"] = load.refused
    result["changes"] = [
        {
            "change": r["change"],
            "took_s": r["took"],
            "longest_pause_s_per_node": load.pause(r["since"], r["until"], r["affected"]),
        }
        for r in report
    ]
    return result


def owned(slots: set[int], channels: list[str]) -> set[str]:
    return {c for c in channels if key_slot(c.encode()) in slots}


def cluster_changes(cluster: RedisClusterSet, channels: list[str]) -> list[Any]:
    def slots_of(node: Any) -> set[int]:
        return next(v.slots for v in cluster.views() if v.port == node.port)

    def kill(i: int) -> Callable[[], set[str]]:
        def run() -> set[str]:
            primary = sorted(cluster.primaries(), key=lambda n: n.port)[i % 3]
            affected = owned(slots_of(primary), channels)
            old, _ = cluster.kill_primary(min(slots_of(primary)))
            cluster.revive(old)
            return affected

        return run

    def failover() -> set[str]:
        primary = sorted(cluster.primaries(), key=lambda n: n.port)[0]
        affected = owned(slots_of(primary), channels)
        cluster.failover(min(slots_of(primary)))
        return affected

    def migrate() -> set[str]:
        busy = channels[0]
        slot = key_slot(busy.encode())
        target = next(p for p in cluster.primaries() if p is not cluster.owner(slot))
        cluster.migrate(slot, target).finish()
        return {busy}

    return [
        *((f"primary SIGKILL {i + 1} (and revived)", kill(i)) for i in range(3)),
        ("CLUSTER FAILOVER", failover),
        ("slot of the busiest channel migrated", migrate),
    ]


def sentinel_changes(sentinels: SentinelSet, channels: list[str], only: str) -> list[Any]:
    def failover() -> set[str]:
        sentinels.failover()
        return set(channels)

    def kill() -> set[str]:
        sentinels.revive(sentinels.kill_master())
        return set(channels)

    changes = {
        "failover": ("SENTINEL FAILOVER", failover),
        "kill": ("master SIGKILL (and revived)", kill),
    }
    return [change for name, change in changes.items() if only in ("both", name)]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=("cluster", "sentinel"))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--redis-replicas", default="-1")
    parser.add_argument("--replicas", type=int, default=2, help="Sentinel set: replicas")
    parser.add_argument("--sentinel-debug", default="", help="SETTING=VALUE[,...]")
    parser.add_argument("--only", choices=("both", "failover", "kill"), default="both")
    parser.add_argument("--log-level", default="info", help="the nodes' (printed past TARGET)")
    args = parser.parse_args()
    channels = [f"busy{n}" for n in range(CHANNELS)]
    bad = False
    for run in range(args.runs):
        debug = dict(kv.split("=") for kv in args.sentinel_debug.split(",") if kv)
        sentinel_set = (args.replicas, {k: int(v) for k, v in debug.items()})
        opener = running_cluster if args.kind == "cluster" else running_sentinels
        with opener(*(() if args.kind == "cluster" else sentinel_set)) as redis:
            nodes = [
                ServerProcess(
                    [
                        "--redis",
                        redis.url,
                        "--heartbeat",
                        "1",
                        "--redis-replicas",
                        args.redis_replicas,
                        "--log-level",
                        args.log_level,
                    ]
                ).start(0)
                for _ in range(2)
            ]
            try:
                if args.kind == "cluster":
                    changes = cluster_changes(redis, channels)  # type: ignore[arg-type]
                else:
                    changes = sentinel_changes(redis, channels, args.only)  # type: ignore[arg-type]
                result = await drive(nodes, channels, changes, reader(args.kind, redis))
            finally:
                for node in nodes:
                    node.stop()
        setting: dict[str, Any] = {"replicas": args.replicas, "debug": args.sentinel_debug}
        setting["redis_replicas"] = args.redis_replicas
        print(json.dumps({"run": run + 1, "kind": args.kind, **setting, **result}), flush=True)
        resumed = [s for c in result["changes"] for s in c["longest_pause_s_per_node"]]
        bad = bad or (result["missing"] and not result["gaps"]) or bool(result["duplicates"])
        bad = bad or any(pause is None or pause > TARGET for pause in resumed)
        bad = bad or bool(result["gaps_dishonest"] or result["gaps_unjudged"])
        for change in result["changes"]:
            for node, pause in zip(nodes, change["longest_pause_s_per_node"], strict=True):
                if pause is None or pause > TARGET:
                    print(f"node {node.url} paused {pause} s through {change['change']}; its log:")
                    print(node.log[-20000:], flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
