"""The memory engine's count of ended epochs (`broker.endings`), against a plain model."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from pushserver.broker.endings import EndedEpochs


class Model:
    """The same rule with a dict per name: the latest `kept` ends' channels are counted."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self.ends: list[str] = []
        self.counts: OrderedDict[str, int] = OrderedDict()

    def end(self, name: str) -> str | None:
        """Count `name`; the name forgotten, if any."""
        forgotten = None
        if len(self.ends) >= self.kept:
            old = self.ends[len(self.ends) - self.kept]
            if old not in self.ends[len(self.ends) - self.kept + 1 :]:  # its last end leaves
                forgotten = old
                del self.counts[old]
        self.ends.append(name)
        self.counts[name] = self.counts.get(name, 0) + 1
        return forgotten


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.lists(st.sampled_from("abcdefghij"), max_size=80))
def test_counts_match_the_model_and_a_name_never_gets_its_counts_back(kept, names):
    """Every end changes the name's counts to a pair it never had, the table holds the names of
    the latest `kept` ends exactly, and each name forgotten adds one to its slot (one slot
    here, so the slot's count is the names forgotten)."""
    table, model = EndedEpochs(kept, 1), Model(kept)
    had: dict[str, set[tuple[int, int]]] = {}
    forgotten = 0
    for name in names:
        had.setdefault(name, set()).add(table.counts(name))
        table.end(name)
        forgotten += model.end(name) is not None
        assert table.counts(name) not in had[name]
        assert len(table) == len(model.counts) <= kept
        assert table.forgotten[0] == forgotten
        for other in "abcdefghij":
            assert table.counts(other) == (forgotten, model.counts.get(other, 0))


def test_many_names_through_a_full_table_stay_findable():
    """Deleting from a table that wraps around keeps every later key reachable (backward
    shift): 1,000 names through room for 64, each counted right after its end."""
    table = EndedEpochs(32, 1 << 10)
    for n in range(1000):
        name = f"c{n % 300}"
        before = table.counts(name)
        table.end(name)
        assert table.counts(name)[1] == (before[1] + 1 if before[1] else 1)
        assert len(table) <= 32
        recent = {f"c{k % 300}" for k in range(max(0, n - 31), n + 1)}
        assert all(table.counts(r)[1] > 0 for r in recent)
