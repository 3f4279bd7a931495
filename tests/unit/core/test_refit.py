"""`refit`: a table keyed by channel rebuilt in place once most of it is gone, order and
contents kept, a dict subclass's own removal never called."""

from __future__ import annotations

import sys

from pushserver.core.refit import refit


def test_a_table_most_of_which_left_is_rebuilt_in_place_in_its_order():
    table = {f"c{i}": i for i in range(100_000)}
    for i in range(99_000):
        del table[f"c{i}"]
    before = sys.getsizeof(table)
    same = table
    assert refit(table)
    assert same is table
    assert list(table.items()) == [(f"c{i}", i) for i in range(99_000, 100_000)]
    assert sys.getsizeof(table) * 50 < before


def test_a_full_or_small_table_is_left_alone():
    full = {f"c{i}": i for i in range(100_000)}
    assert not refit(full)
    small = {f"c{i}": i for i in range(1000)}
    for i in range(999):
        del small[f"c{i}"]
    assert not refit(small)  # its room is under the slack: not worth a copy
    assert small == {"c999": 999}


class Counted(dict[str, int]):
    """Counts its removals, as `Histories` un-counts what a dropped channel buffered."""

    removed = 0

    def pop(self, key: str, *default: int) -> int:  # type: ignore[override]
        Counted.removed += 1
        return super().pop(key, *default)

    def __delitem__(self, key: str) -> None:
        self.pop(key)


def test_a_dict_subclass_is_rebuilt_without_its_own_removal():
    table = Counted({f"c{i}": i for i in range(100_000)})
    for i in range(99_000):
        del table[f"c{i}"]
    removed = Counted.removed
    assert refit(table)
    assert Counted.removed == removed
    assert type(table) is Counted and len(table) == 1000
