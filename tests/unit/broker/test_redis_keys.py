"""Where the Redis engines keep a channel: one Redis's flat names, a cluster's hash-tagged ones
(every key of a channel, its epoch counts and its shard channel in the channel's slot)."""

from __future__ import annotations

from redis.crc import key_slot

from pushserver.broker.redis.scripts import SLOTS, Keys, TaggedKeys, slot_tags


def test_each_slot_has_a_tag_that_hashes_to_it() -> None:
    tags = slot_tags()
    assert len(tags) == SLOTS
    assert all(key_slot(tag.encode()) == slot for slot, tag in enumerate(tags))
    assert max(len(tag) for tag in tags) <= 5


def test_every_key_of_a_cluster_channel_is_in_its_slot() -> None:
    keys = TaggedKeys(0)
    for name in ("news", "a", "x.y:z@1-_", "9" * 128):
        slot = key_slot(name.encode())
        everything = [*keys.channel(name), keys.seen(name, "k1"), *keys.shared(name)]
        assert {key_slot(k.encode()) for k in everything} == {slot}, name
        assert key_slot(keys.topic(name)) == slot


def test_one_redis_keeps_its_names_and_counts_per_database() -> None:
    keys = Keys(3)
    assert keys.channel("news") == ("pushserver:m:news", "pushserver:h:news")
    assert keys.shared("news") == ("pushserver:starts", "pushserver:forgotten")
    assert keys.topic("news") == b"pushserver:3:news"
