"""The Redis engine's keys and Lua scripts.

One script assigns a channel's next id, appends the message to the channel's stream and
PUBLISHes it whole, so nodes publishing to one channel never clash and a node needs no extra read
to deliver; the messages of one call to one channel share one notification. Another reads a
channel's epoch and the messages a node has not seen.

A channel's keys expire when it is idle, and its next publish starts a new epoch. Nobody sees
them go, so the script counts the epochs each channel begins instead (`STARTS_KEY`), and the
unstarted epoch of a channel without keys carries that count (`core.positions.epoch_tag`): a
cursor from before an epoch never passes for one taken before the next.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from redis.crc import key_slot

from ...core.messages import Message


def meta_key(name: str) -> str:
    """A hash: the channel's epoch `e`, last id `i` and lineage `r` (see LINEAGE_LUA)."""
    return f"pushserver:m:{name}"


def history_key(name: str) -> str:
    """A stream of the channel's buffered messages, entry id `ID-0`, fields `t` (ts), `d`."""
    return f"pushserver:h:{name}"


def idempotency_key(name: str, key: str) -> str:
    """A hash: the epoch `e`, id `i` and ts `t` a keyed publish produced (see PUBLISH_LUA)."""
    return f"pushserver:k:{name}|{key}"  # `|` is never in a channel name


GENERATION_KEY = "pushserver:generation"
"""One key per database, set once: a new value means Redis lost its data (see
`core.positions.unstarted`)."""

STARTS_KEY = "pushserver:starts"
"""A sorted set: channels by the number of epochs they began, at most `kept` of them (an argument
of PUBLISH_LUA); past it, the one that began the fewest is forgotten (see FORGOTTEN_KEY)."""

FORGOTTEN_KEY = "pushserver:forgotten"
"""A string of 65,536 unsigned 32-bit counters (256 KiB, BITFIELD): names forgotten from
STARTS_KEY, by slot (the first 16 bits of the name's SHA-1). A forgotten name's count starts
again, so its slot's count goes up: every unstarted epoch of the slot changes (a rare gap too
many), none comes back."""


def topic_prefix(db: int) -> str:
    """Notifications are per database, so two servers on one Redis with other dbs never mix."""
    return f"pushserver:{db}:"


class Keys:
    """Where one Redis keeps a channel: the flat names above."""

    counters = 65536
    """FORGOTTEN_KEY's counters (one per 16-bit SHA-1 prefix)."""
    lua_topic = "ARGV[6] .. name"
    """A channel's notification topic in the publish script (ARGV[6]: the prefix)."""
    lua_life = "''"
    """What every tag of a slot begins with (TAG_LUA): nothing for one Redis, whose generation
    key (GENERATION_KEY) already changes when it loses its data."""

    def __init__(self, db: int = 0) -> None:
        self.prefix = topic_prefix(db)

    def channel(self, name: str) -> tuple[str, str]:
        return meta_key(name), history_key(name)

    def seen(self, name: str, key: str) -> str:
        return idempotency_key(name, key)

    def shared(self, name: str) -> tuple[str, str]:
        """The epoch counts the channel's scripts update besides its own keys."""
        return STARTS_KEY, FORGOTTEN_KEY

    def topic(self, name: str) -> bytes:
        return (self.prefix + name).encode()


class TaggedKeys(Keys):
    """Where a Redis Cluster keeps a channel: every key, and the shard channel its messages go
    out on, carry the name as a hash tag (a name has no braces), so one slot holds them all and
    one script reaches them. The epoch counts are kept per slot, under a tag hashing to it."""

    counters = 1
    """One forgotten count per slot: the slot is already the spread."""
    lua_topic = "ARGV[6] .. '{' .. name .. '}'"
    lua_life = "life(forgotten, candidate)"

    def channel(self, name: str) -> tuple[str, str]:
        return f"pushserver:{{{name}}}:m", f"pushserver:{{{name}}}:h"

    def seen(self, name: str, key: str) -> str:
        return f"pushserver:{{{name}}}:k:{key}"

    def shared(self, name: str) -> tuple[str, str]:
        tag = slot_tags()[key_slot(name.encode())]
        return f"pushserver:{{{tag}}}:starts", f"pushserver:{{{tag}}}:forgotten"

    def topic(self, name: str) -> bytes:
        return f"{self.prefix}{{{name}}}".encode()


@functools.cache
def slot_tags() -> list[str]:
    """For each of the 16,384 slots a short string that hashes to it (computed once, ~0.1 s)."""
    tags: list[str | None] = [None] * SLOTS
    left, n = SLOTS, 0
    while left:
        text = format(n, "x")
        slot = key_slot(text.encode())
        if tags[slot] is None:
            tags[slot] = text
            left -= 1
        n += 1
    return [t for t in tags if t is not None]


SLOTS = 16384

# The tag of the unstarted epoch of a channel without keys (`core.positions.epoch_tag`).
# COUNTERS: how many forgotten counts FORGOTTEN_KEY holds (`Keys.counters`). LIFE: the Lua of
# what every tag of the slot begins with (`Keys.lua_life`). In a cluster that is the slot's
# life, `s` and a number drawn (from an epoch candidate) when the slot's forgotten key is first
# used and kept after its counter: a primary that loses its data (restarted empty, FLUSHALL)
# loses it too, so every tag of its slots changes, as the one generation key of the cluster,
# kept on another shard, would not.
TAG_LUA = """
local function slot(name)
  return '#' .. (tonumber(string.sub(redis.sha1hex(name), 1, 4), 16) % COUNTERS)
end

local function life(forgotten, candidate)
  local at = '#' .. COUNTERS
  local drawn = redis.call('BITFIELD', forgotten, 'GET', 'u32', at)[1]
  if drawn == 0 then
    drawn = tonumber(string.sub(candidate, 1, 4), 16) + 1
    redis.call('BITFIELD', forgotten, 'SET', 'u32', at, drawn)
  end
  return string.format('s%x', drawn)
end

local function tag_of(name, starts, forgotten, candidate)
  local lost = redis.call('BITFIELD', forgotten, 'GET', 'u32', slot(name))[1]
  local begun = tonumber(redis.call('ZSCORE', starts, name) or 0)
  local tag = LIFE
  if lost > 0 then
    tag = string.format('g%x', lost)
  end
  if begun > 0 then
    tag = tag .. string.format('n%x', begun)
  end
  return tag
end
"""

# The lineage stamp: every channel's meta hash keeps `r`, the first 8 hex digits of the
# `master_replid` of the Redis that last wrote it. That id changes when Redis restarts (from its
# files, which may be behind what it acknowledged) and when a replica is promoted (which may lack
# the old primary's last writes). A channel last written under a lineage the caller does not
# trust may hold fewer ids than nodes have seen, so its epoch ends before any id is handed out
# again (`foreign`). TRUSTED (an argument): lineages known to hold everything they acknowledged,
# space-separated; with `*` in it, the predecessor of a promoted replica is trusted too (the
# caller made every publish wait for a replica, `WAIT`).
LINEAGE_LUA = """
local info = redis.call('INFO', 'replication')
local OWN = string.sub(string.match(info, 'master_replid:(%x+)'), 1, 8)
local OWN2 = string.sub(string.match(info, 'master_replid2:(%x+)'), 1, 8)

local function foreign(meta, trusted)
  local r = redis.call('HGET', meta, 'r')
  if r == OWN then
    return false
  end
  if (not r) or string.find(trusted, r, 1, true)
      or (r == OWN2 and string.find(trusted, '*', 1, true)) then
    redis.call('HSET', meta, 'r', OWN)
    return false
  end
  return true
end
"""

# Start a new epoch at the channel's next message, tagged as the unstarted epoch it begins after,
# and count it (and drop any history left from the old one, whose ids would clash with the new
# ones). `epoch_of` finds the channel's epoch, or starts one when there is none or it is foreign.
EPOCH_LUA = (
    TAG_LUA
    + LINEAGE_LUA
    + """
local function begin(meta, hist, candidate, name, starts, forgotten, kept)
  local epoch = candidate .. tag_of(name, starts, forgotten, candidate)
  redis.call('ZINCRBY', starts, 1, name)
  if redis.call('ZCARD', starts) > kept then
    local gone = redis.call('ZPOPMIN', starts)[1]
    redis.call('BITFIELD', forgotten, 'INCRBY', 'u32', slot(gone), 1)
  end
  redis.call('DEL', hist)
  redis.call('HSET', meta, 'e', epoch, 'i', 0, 'r', OWN)
  return epoch
end

local function epoch_of(meta, hist, candidate, name, starts, forgotten, kept, trusted)
  local epoch = redis.call('HGET', meta, 'e')
  if (not epoch) or foreign(meta, trusted) then
    epoch = begin(meta, hist, candidate, name, starts, forgotten, kept)
  end
  return epoch
end
"""
)

# KEYS: meta, history, idempotency key per item, then the two `Keys.shared` keys. ARGV: epoch
# candidate, history size, history ttl ms, meta ttl ms, ts, topic prefix, names kept in the
# starts key, trusted lineages, then name, data, idempotency key ('' = none) per item.
# An item whose key is remembered is not published: its original epoch, id and ts come back,
# flagged 1. Checking and remembering the key in the same script as the publish is what makes
# a retry after an unknown outcome safe. Its message is notified again while the history holds
# it in that epoch: the outcome was unknown because its notification may not have been sent,
# and a node that had it already drops the repeat (`ordering.Order.offer`). Each channel gets
# one notification for all the messages the call published to it (consecutive ids: the script
# runs alone), in the order the channels first appear, so a call's messages reach every node
# together (`notification`).
# NOTIFY: the command that sends them (PUBLISH, or SPUBLISH in a cluster); when empty they come
# back instead, for the caller to send once replicas hold the call (`WAIT`). TOPIC: the Lua of
# a channel's notification topic (`Keys.lua_topic`). Reply: the results, and when NOTIFY is
# empty {results, {topic, payload, ...}} (a reply of one level less to read on every publish).
PUBLISH_LUA_TEMPLATE = """
local out, notes, order, pubs, again = {}, {}, {}, {}, {}
local starts, forgotten, kept = KEYS[#KEYS - 1], KEYS[#KEYS], tonumber(ARGV[7])
local function send(name, payload)
  local topic = TOPIC
  if 'NOTIFY' == '' then
    pubs[#pubs + 1] = topic
    pubs[#pubs + 1] = payload
  else
    redis.call('NOTIFY', topic, payload)
  end
end
for k = 1, (#ARGV - 8) / 3 do
  local meta, hist, seen_key = KEYS[3 * k - 2], KEYS[3 * k - 1], KEYS[3 * k]
  local name, data, keyed = ARGV[6 + 3 * k], ARGV[7 + 3 * k], ARGV[8 + 3 * k] ~= ''
  local seen = {false}
  if keyed then
    seen = redis.call('HMGET', seen_key, 'e', 'i', 't')
  end
  if seen[1] then
    out[k] = {seen[1], seen[2], seen[3], 1}
    if redis.call('HGET', meta, 'e') == seen[1] then
      local entry = redis.call('XRANGE', hist, seen[2] .. '-0', seen[2] .. '-0')[1]
      if entry then
        local stored = entry[2][4]
        again[#again + 1] = {name, seen[1] .. '\\n' .. seen[2] .. '\\n' .. seen[3] .. '\\n'
          .. #stored .. '\\n' .. stored}
      end
    end
  else
    local epoch = epoch_of(meta, hist, ARGV[1], name, starts, forgotten, kept, ARGV[8])
    local id = redis.call('HINCRBY', meta, 'i', 1)
    redis.call('XADD', hist, 'MAXLEN', '~', ARGV[2], id .. '-0', 't', ARGV[5], 'd', data)
    redis.call('PEXPIRE', hist, ARGV[3])
    redis.call('PEXPIRE', meta, ARGV[4])
    local note = notes[name]
    if not note then
      note = {epoch, id, {}, {}}
      notes[name] = note
      order[#order + 1] = name
    end
    table.insert(note[3], #data)
    table.insert(note[4], data)
    if keyed then
      redis.call('HSET', seen_key, 'e', epoch, 'i', id, 't', ARGV[5])
      redis.call('PEXPIRE', seen_key, ARGV[3])
    end
    out[k] = {epoch, id, ARGV[5], 0}
  end
end
for _, name in ipairs(order) do
  local note = notes[name]
  local head = note[1] .. '\\n' .. note[2] .. '\\n' .. ARGV[5] .. '\\n'
  send(name, head .. table.concat(note[3], ' ') .. '\\n' .. table.concat(note[4]))
end
for _, item in ipairs(again) do
  send(item[1], item[2])
end
if 'NOTIFY' == '' then
  return {out, pubs}
end
return out
"""


def notification(name: str, payload: bytes) -> list[Message]:
    """The messages of one PUBLISH of `PUBLISH_LUA`: `epoch\\nfirst id\\nts\\nsizes\\n`, then
    the data of each message, back to back (`sizes`: their byte lengths, space-separated)."""
    epoch_bytes, first, ts_bytes, sizes, body = payload.split(b"\n", 4)
    epoch, id_, ts = epoch_bytes.decode(), int(first), float(ts_bytes)
    out = []
    start = 0
    for size in sizes.split():
        end = start + int(size)
        out.append(Message(name, epoch, id_, ts, body[start:end]))
        start = end
        id_ += 1
    return out


def stream_messages(name: str, epoch: bytes, entries: Iterable[Any]) -> list[Message]:
    """The messages of a channel's stream entries (XRANGE, or the sync script's reply): entry
    id `ID-0`, fields `t` (ts) and `d` (data)."""
    text = epoch.decode()
    out = []
    for entry_id, fields in entries:
        if not isinstance(fields, dict):
            fields = dict(zip(fields[::2], fields[1::2], strict=True))
        id_ = int(entry_id.split(b"-", 1)[0])
        out.append(Message(name, text, id_, float(fields[b"t"]), fields[b"d"]))
    return out


# KEYS: meta, history, the two `Keys.shared` keys. ARGV: meta ttl ms, after id (-1 = the last
# N), N, the epoch `after` belongs to, the channel's name, an epoch candidate, names kept, trusted
# lineages. When the channel is in another epoch now (Redis lost it and it came back), everything
# the new epoch buffers is read: none of it was seen; when its lineage is foreign (LINEAGE_LUA),
# its epoch ends here, before any id is handed out again. A channel nobody published to (or
# whose keys expired) has no keys and gets none: its epoch is false and the tag of its unstarted
# epoch comes last (the reader prefixes this database's generation) until its first message, so
# subscribing leaves nothing behind in Redis.
SYNC_LUA_TEMPLATE = """
local epoch = redis.call('HGET', KEYS[1], 'e')
if not epoch then
  return {false, 0, {}, tag_of(ARGV[5], KEYS[3], KEYS[4], ARGV[6])}
end
if foreign(KEYS[1], ARGV[8]) then
  epoch = begin(KEYS[1], KEYS[2], ARGV[6], ARGV[5], KEYS[3], KEYS[4], tonumber(ARGV[7]))
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local last = redis.call('HGET', KEYS[1], 'i')
local after = tonumber(ARGV[2])
if after >= 0 and epoch ~= ARGV[4] then
  after = 0
end
local entries
if after < 0 then
  entries = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', ARGV[3])
else
  entries = redis.call('XRANGE', KEYS[2], (after + 1) .. '-0', '+')
end
return {epoch, last, entries, ''}
"""


# KEYS: meta, history, the two `Keys.shared` keys. ARGV: the epoch a node saw, the last id it saw
# there, an epoch candidate, the channel's name, names kept. Detection by
# position (`rolled_back`): Redis holds the channel's epoch with fewer ids than a node has seen
# in it (a failover to a replica that lacked them, a restore), so its counter would hand those
# ids out again; the epoch ends first, once, whichever node asks first (compare and set).
# Reply: the channel's epoch now.
END_LUA_TEMPLATE = """
local epoch = redis.call('HGET', KEYS[1], 'e')
if epoch == ARGV[1] and tonumber(redis.call('HGET', KEYS[1], 'i')) < tonumber(ARGV[2]) then
  epoch = begin(KEYS[1], KEYS[2], ARGV[3], ARGV[4], KEYS[3], KEYS[4], tonumber(ARGV[5]))
end
return epoch
"""


def rolled_back(asked: tuple[str, int], epoch: bytes | None, last: int) -> bool:
    """Whether a read shows Redis behind what the reader had seen before asking: the same epoch
    with a last id below the one it read after. Within an epoch Redis's counter only grows and
    a node only learns ids Redis assigned, so no stale read explains it: Redis lost ids."""
    seen_epoch, seen = asked
    return epoch is not None and seen > 0 and epoch.decode() == seen_epoch and last < seen


def publish_lua(keys: Keys, notify: str) -> str:
    """PUBLISH_LUA_TEMPLATE for `keys`' layout, notifying with `notify` ('' = returned)."""
    body = PUBLISH_LUA_TEMPLATE.replace("TOPIC", keys.lua_topic).replace("NOTIFY", notify)
    return _counted(keys, EPOCH_LUA + body)


def sync_lua(keys: Keys) -> str:
    return _counted(keys, EPOCH_LUA + SYNC_LUA_TEMPLATE)


def end_lua(keys: Keys) -> str:
    return _counted(keys, EPOCH_LUA + END_LUA_TEMPLATE)


def _counted(keys: Keys, text: str) -> str:
    return text.replace("COUNTERS", str(keys.counters)).replace("LIFE", keys.lua_life)


PUBLISH_LUA = publish_lua(Keys(), "PUBLISH")
SYNC_LUA = sync_lua(Keys())
