"""The key names a shard's publish script call carries: made once per channel and kept
(`Shard._names`), they must be the names `Keys` gives, keyed publishes included, on one Redis
and in a cluster, also once the kept names are dropped for a full table."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import pytest

from pushserver.broker.redis import shard as shard_module
from pushserver.broker.redis.pipe import Arg, Script
from pushserver.broker.redis.scripts import Keys, TaggedKeys
from pushserver.broker.redis.shard import Plan, Shard
from pushserver.core.broker import Item


class Recorder:
    """A `Writer` that keeps each script call's keys and answers every item as published."""

    def __init__(self) -> None:
        self.calls: list[list[Arg]] = []

    async def script(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        self.calls.append(list(keys))
        items = (len(args) - 8) // 3
        return [[b"e", n + 1, b"1.0", 0] for n in range(items)]  # the script notified

    async def call(self, *command: Arg) -> Any:
        raise AssertionError("no replicas asked: nothing but the script is sent")

    async def aclose(self) -> None:
        pass


def shard_on(keys: Keys) -> tuple[Shard, Recorder]:
    plan = Plan(
        keys,
        Script("p"),
        Script("s"),
        Script("e"),
        "PUBLISH",
        0,
        10,
        1000,
        2000,
        16,
        lambda: "",
        lambda name: None,
        10.0,
    )
    writer = Recorder()
    return Shard("test", plan, cast(Any, None), writer, cast(Any, None)), writer


def expected(keys: Keys, items: Sequence[Item]) -> list[Arg]:
    names: list[Arg] = []
    for name, _, key in items:
        names += (*keys.channel(name), keys.seen(name, key or ""))
    return [*names, *keys.shared(items[0][0])]


@pytest.mark.parametrize("keys", [Keys(2), TaggedKeys(0)], ids=["one Redis", "cluster"])
def test_each_call_names_the_keys_of_its_channels(
    keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shard_module, "NAMES_KEPT", 3)  # the table fills and is dropped often
    shard, writer = shard_on(keys)
    calls: list[list[Item]] = [
        [Item("news", b"1", None)],
        [Item("news", b"2", "k1")],
        [Item("news", b"3", None), Item("news", b"4", "k2")],
        *([Item(f"c{n % 5}", b"x", None)] for n in range(12)),
        [Item("c4", b"y", "k3")],
        [Item("news", b"5", None)],
    ]

    async def run() -> None:
        for items in calls:
            await shard.publishing(0).submit(items)

    asyncio.run(run())
    assert writer.calls == [expected(keys, items) for items in calls]
    assert len(shard._names) <= 3
