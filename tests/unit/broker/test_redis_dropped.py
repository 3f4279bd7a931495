"""A cluster primary that drops this node's subscription to a channel it still owns.

`CLUSTER SETSLOT <slot> NODE <itself>` (sent to every primary at the end of a migration, the new
owner included) makes Redis drop the slot's shard-channel subscribers and push `sunsubscribe`,
though the slot map does not change. The node used to follow the map only, found the channel
where it was, and stayed subscribed in its own eyes but deaf in Redis's: a subscriber got
nothing more (seen under load: 16 of 22 messages). A dropped channel is now subscribed again
where the map says, the same primary included (`Following.dropped`, `rehome`); the answer to
the node's own SUNSUBSCRIBE, sent to a channel's old primary, drops nothing; a MOVED answer to
SSUBSCRIBE drops the channels of its slot there.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from redis.crc import key_slot

from pushserver.broker.redis.following import Following, Listen
from pushserver.broker.redis.shard import Shard
from pushserver.config import Settings


class Link:
    def __init__(self) -> None:
        self.up = self.connected = True
        self.sent: list[tuple[str, bytes]] = []

    def send(self, command: str, topic: bytes) -> bool:
        self.sent.append((command, topic))
        return True


class Primary:
    def __init__(self, name: str) -> None:
        self.name = name
        self.link = Link()

    def subscribe(self, topic: bytes) -> asyncio.Future[None]:
        self.link.send("SUBSCRIBE", topic)
        return asyncio.get_running_loop().create_future()


class Engine(Following):
    def __init__(self, owner: Primary) -> None:
        super().__init__(Settings())
        self._sink = cast(Any, object())
        self.owner = owner

    def shard_of(self, name: str) -> Shard | None:
        return cast(Shard, self.owner)


def subscribed(engine: Engine, name: str) -> Listen:
    rec = engine._listen(name)
    engine._subscribed(rec.topic)
    assert rec.confirmed.done() and rec.confirmed.exception() is None
    return rec


async def test_a_channel_dropped_by_the_primary_that_still_owns_it_is_subscribed_again() -> None:
    primary = Primary("a")
    engine = Engine(primary)
    rec = subscribed(engine, "news")
    primary.link.sent.clear()
    assert engine.dropped(cast(Shard, primary), key_slot(rec.topic), rec.topic)
    engine.rehome()
    assert primary.link.sent == [("SUBSCRIBE", rec.topic)]  # no SUNSUBSCRIBE: nothing to undo
    engine._subscribed(rec.topic)
    engine.rehome()  # confirmed: nothing more to do
    assert primary.link.sent == [("SUBSCRIBE", rec.topic)]


async def test_the_answer_to_the_nodes_own_sunsubscribe_drops_nothing() -> None:
    old, new = Primary("a"), Primary("b")
    engine = Engine(old)
    rec = subscribed(engine, "news")
    engine.owner = new
    engine.rehome()
    assert old.link.sent[-1] == ("UNSUBSCRIBE", rec.topic)
    assert new.link.sent == [("SUBSCRIBE", rec.topic)]
    engine._subscribed(rec.topic)
    assert not engine.dropped(cast(Shard, old), key_slot(rec.topic), rec.topic)
    assert rec.confirmed.exception() is None


async def test_a_moved_answer_to_ssubscribe_drops_the_channels_of_its_slot_there() -> None:
    primary = Primary("a")
    engine = Engine(primary)
    names = ["a1", "b2", "c3"]
    recs = [subscribed(engine, name) for name in names]
    hit = recs[1]
    assert engine.dropped(cast(Shard, primary), key_slot(hit.topic), None)
    assert [r.confirmed.exception() is not None for r in recs] == [
        key_slot(r.topic) == key_slot(hit.topic) for r in recs
    ]
    assert not engine.dropped(cast(Shard, Primary("b")), key_slot(hit.topic), None)
