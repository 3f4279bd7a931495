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

from collections.abc import Iterable
from typing import Any

from ...core.messages import Message


def meta_key(name: str) -> str:
    """A hash: the channel's epoch `e` and last id `i`."""
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


# The tag of the unstarted epoch of a channel without keys (`core.positions.epoch_tag`).
TAG_LUA = """
local function slot(name)
  return '#' .. tonumber(string.sub(redis.sha1hex(name), 1, 4), 16)
end

local function tag_of(name, starts, forgotten)
  local lost = redis.call('BITFIELD', forgotten, 'GET', 'u32', slot(name))[1]
  local begun = tonumber(redis.call('ZSCORE', starts, name) or 0)
  local tag = ''
  if lost > 0 then
    tag = string.format('g%x', lost)
  end
  if begun > 0 then
    tag = tag .. string.format('n%x', begun)
  end
  return tag
end
"""

# Find the channel's epoch, or start a new one at its first message, tagged as the unstarted
# epoch it begins after, and count it (and drop any history left from the old one, whose ids
# would clash with the new ones).
EPOCH_LUA = (
    TAG_LUA
    + """
local function epoch_of(meta, hist, candidate, name, starts, forgotten, kept)
  local epoch = redis.call('HGET', meta, 'e')
  if not epoch then
    epoch = candidate .. tag_of(name, starts, forgotten)
    redis.call('ZINCRBY', starts, 1, name)
    if redis.call('ZCARD', starts) > kept then
      local gone = redis.call('ZPOPMIN', starts)[1]
      redis.call('BITFIELD', forgotten, 'INCRBY', 'u32', slot(gone), 1)
    end
    redis.call('DEL', hist)
    redis.call('HSET', meta, 'e', epoch, 'i', 0)
  end
  return epoch
end
"""
)

# KEYS: meta, history, idempotency key per item, then STARTS_KEY and FORGOTTEN_KEY. ARGV: epoch
# candidate, history size, history ttl ms, meta ttl ms, ts, topic prefix, names kept in
# STARTS_KEY, then name, data, idempotency key ('' = none) per item.
# An item whose key is remembered is not published: its original epoch, id and ts come back,
# flagged 1. Checking and remembering the key in the same script as the publish is what makes
# a retry after an unknown outcome safe. Each channel gets one notification for all the
# messages the call published to it (consecutive ids: the script runs alone), in the order the
# channels first appear, so a call's messages reach every node together (`notification`).
PUBLISH_LUA = (
    EPOCH_LUA
    + """
local out, notes, order = {}, {}, {}
local starts, forgotten, kept = KEYS[#KEYS - 1], KEYS[#KEYS], tonumber(ARGV[7])
for k = 1, (#ARGV - 7) / 3 do
  local meta, hist, seen_key = KEYS[3 * k - 2], KEYS[3 * k - 1], KEYS[3 * k]
  local name, data, keyed = ARGV[5 + 3 * k], ARGV[6 + 3 * k], ARGV[7 + 3 * k] ~= ''
  local seen = {false}
  if keyed then
    seen = redis.call('HMGET', seen_key, 'e', 'i', 't')
  end
  if seen[1] then
    out[k] = {seen[1], seen[2], seen[3], 1}
  else
    local epoch = epoch_of(meta, hist, ARGV[1], name, starts, forgotten, kept)
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
  redis.call('PUBLISH', ARGV[6] .. name, head .. table.concat(note[3], ' ') .. '\\n'
    .. table.concat(note[4]))
end
return out
"""
)


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


# KEYS: meta, history, STARTS_KEY, FORGOTTEN_KEY. ARGV: meta ttl ms, after id (-1 = the last N),
# N, the epoch `after` belongs to, the channel's name. When the channel is in another epoch now
# (Redis lost it and it came back), everything the new epoch buffers is read: none of it was
# seen. A channel nobody published to (or whose keys expired) has no keys and gets none: its
# epoch is false and the tag of its unstarted epoch comes last (the reader prefixes this
# database's generation) until its first message, so subscribing leaves nothing behind in Redis.
SYNC_LUA = (
    TAG_LUA
    + """
local epoch = redis.call('HGET', KEYS[1], 'e')
if not epoch then
  return {false, 0, {}, tag_of(ARGV[5], KEYS[3], KEYS[4])}
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
)
