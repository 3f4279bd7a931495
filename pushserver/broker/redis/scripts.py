"""The Redis engine's keys and Lua scripts.

One script assigns a channel's next id, appends the message to the channel's stream and
PUBLISHes it whole, so nodes publishing to one channel never clash and a node needs no extra read
to deliver. Another reads a channel's epoch and the messages a node has not seen.
"""

from __future__ import annotations


def meta_key(name: str) -> str:
    """A hash: the channel's epoch `e` and last id `i`."""
    return f"pushserver:m:{name}"


def history_key(name: str) -> str:
    """A stream of the channel's buffered messages, entry id `ID-0`, fields `t` (ts), `d`."""
    return f"pushserver:h:{name}"


def topic_prefix(db: int) -> str:
    """Notifications are per database, so two servers on one Redis with other dbs never mix."""
    return f"pushserver:{db}:"


# Find the channel's epoch, or start a new one at its first message (and drop any history left
# from the old one, whose ids would clash with the new ones).
EPOCH_LUA = """
local function epoch_of(meta, hist, candidate)
  local epoch = redis.call('HGET', meta, 'e')
  if not epoch then
    epoch = candidate
    redis.call('DEL', hist)
    redis.call('HSET', meta, 'e', epoch, 'i', 0)
  end
  return epoch
end
"""

# KEYS: meta, history per item. ARGV: epoch candidate, history size, history ttl ms, meta ttl ms,
# ts, topic prefix, then name, data per item.
PUBLISH_LUA = (
    EPOCH_LUA
    + """
local out = {}
for k = 1, (#ARGV - 6) / 2 do
  local meta, hist = KEYS[2 * k - 1], KEYS[2 * k]
  local name, data = ARGV[5 + 2 * k], ARGV[6 + 2 * k]
  local epoch = epoch_of(meta, hist, ARGV[1])
  local id = redis.call('HINCRBY', meta, 'i', 1)
  redis.call('XADD', hist, 'MAXLEN', '~', ARGV[2], id .. '-0', 't', ARGV[5], 'd', data)
  redis.call('PEXPIRE', hist, ARGV[3])
  redis.call('PEXPIRE', meta, ARGV[4])
  redis.call('PUBLISH', ARGV[6] .. name, epoch .. '\\n' .. id .. '\\n' .. ARGV[5] .. '\\n' .. data)
  out[k] = {epoch, id}
end
return out
"""
)

# KEYS: meta, history. ARGV: meta ttl ms, after id (-1 = the last N), N, the epoch `after`
# belongs to. When the channel is in another epoch now (Redis lost it and it came back),
# everything the new epoch buffers is read: none of it was seen. A channel nobody published to
# has no keys and gets none: its epoch is false (the reader's `UNSTARTED`) until its first
# message, so subscribing leaves nothing behind in Redis.
SYNC_LUA = """
local epoch = redis.call('HGET', KEYS[1], 'e')
if not epoch then
  return {false, 0, {}}
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
return {epoch, last, entries}
"""
