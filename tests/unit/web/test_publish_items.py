"""The items a publish hands the broker: named tuples made in C (`new_item`), the same as the
named tuple's own constructor makes."""

from __future__ import annotations

import pytest

from pushserver.config import Settings
from pushserver.core.broker import Item, new_item
from pushserver.web.publishing import batch_items, one_item


@pytest.mark.parametrize("fields", [("a", b'"x"', None), ("b.c", b"1", "key-1")])
def test_an_item_made_in_c_is_the_named_tuple(fields) -> None:
    made = new_item(fields)
    assert (
        type(made) is Item and made == Item(*fields) and made._asdict() == Item(*fields)._asdict()
    )
    assert (made.channel, made.data, made.key) == fields


def test_a_publish_of_one_gives_one_item() -> None:
    [item] = one_item("news", b'{ "a" : [1, 2] }', "k", as_json=True)
    assert type(item) is Item and item == Item("news", b'{"a":[1,2]}', "k")
    [text] = one_item("news", b"caf\xc3\xa9", None, as_json=False)
    assert type(text) is Item and text == Item("news", b'"caf\xc3\xa9"', None)


def test_a_batch_gives_one_item_each() -> None:
    body = b'[{"channel": "a", "data": 1}, {"channel": "b", "data": "t", "idempotency_key": "k"}]'
    items = batch_items(body, Settings(), None)
    assert [type(item) for item in items] == [Item, Item]
    assert items == [Item("a", b"1"), Item("b", b'"t"', "k")]
