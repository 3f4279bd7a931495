"""How many epochs each channel has ended, for the memory engine's unstarted-epoch tags, kept
in flat arrays: no object per channel.

The memory engine tags a channel's unstarted epoch with these counts (`core.positions.
epoch_tag`), so a cursor taken before a channel was dropped never passes for one taken after.
Channels are counted by the hash of their name: a `str` kept for each of the latest 16,384
channels to end an epoch (or an `int` for its hash) outlives the channel it was allocated
beside, and such survivors held tens of the small-object allocator's 1 MiB arenas after a
sweep (docs/operations.md, "Memory handed back"). Here the counts are an open-addressing table
(linear probing, deletion by backward shift) and a ring of the latest ends, all arrays
allocated once.
"""

from __future__ import annotations

from array import array


def _zeros(count: int) -> array[int]:
    return array("q", bytes(8 * count))


class EndedEpochs:
    """Epochs ended per channel for the latest `kept` ends; a channel whose last end is older
    is forgotten and counted in its slot (of `slots`, by hash) instead, which changes the tag
    of every channel there: a rare gap too many, never one too few. Two names of one hash
    share their count, the same way."""

    __slots__ = ("_counts", "_ends", "_keys", "_mask", "_ring", "_stamps", "forgotten", "size")

    def __init__(self, kept: int, slots: int) -> None:
        room = 1 << (2 * kept - 1).bit_length()  # at least twice `kept`: probes stay short
        self._mask = room - 1
        self._keys = _zeros(room)
        """Each entry's hash (0: empty)."""
        self._counts = _zeros(room)
        self._stamps = _zeros(room)
        """When each entry last ended an epoch, counted in ends."""
        self._ring = _zeros(kept)
        """The hash that ended the `n`th epoch, at `n % kept`."""
        self._ends = 0
        self.size = 0
        """Channels counted by hash."""
        self.forgotten = _zeros(slots)
        """Channels forgotten, per slot."""

    def __len__(self) -> int:
        return self.size

    def counts(self, name: str) -> tuple[int, int]:
        """Channels forgotten in `name`'s slot, and epochs `name` ended since it was last
        forgotten."""
        key = _key(name)
        at = self._find(key)
        return self.forgotten[key % len(self.forgotten)], self._counts[at] if at >= 0 else 0

    def end(self, name: str) -> None:
        """`name` ended an epoch: its counts now differ from every pair they were before."""
        ring, stamp = self._ring, self._ends
        spot = stamp % len(ring)
        if stamp >= len(ring):  # the end `kept` ago leaves the ring: forget its channel if
            old = ring[spot]  # that was its last
            at = self._find(old)
            if at >= 0 and self._stamps[at] == stamp - len(ring):
                self._delete(at)
                self.forgotten[old % len(self.forgotten)] += 1
        key = _key(name)
        at = self._find(key)
        if at < 0:
            at = -1 - at
            self._keys[at] = key
            self._counts[at] = 0
            self.size += 1
        self._counts[at] += 1
        self._stamps[at] = stamp
        ring[spot] = key
        self._ends = stamp + 1

    def _find(self, key: int) -> int:
        """The index of `key`, or `-1 - index` of the empty entry where it would go."""
        keys, mask = self._keys, self._mask
        at = key & mask
        while True:
            found = keys[at]
            if found == key:
                return at
            if not found:
                return -1 - at
            at = (at + 1) & mask

    def _delete(self, gap: int) -> None:
        """Empty entry `gap`, moving back each later entry of its run that may fill it (so
        every key stays reachable from its home without tombstones)."""
        keys, counts, stamps, mask = self._keys, self._counts, self._stamps, self._mask
        at = gap
        while True:
            at = (at + 1) & mask
            key = keys[at]
            if not key:
                break
            if (at - (key & mask)) & mask >= (at - gap) & mask:  # its home is not past the gap
                keys[gap], counts[gap], stamps[gap] = key, counts[at], stamps[at]
                gap = at
        keys[gap] = 0
        self.size -= 1


def _key(name: str) -> int:
    """`name`'s hash, never 0 (an empty entry); a hash is never -1 either."""
    return hash(name) or 1
