"""The head limits fit every subscription the server accepts, with its cursor."""

from __future__ import annotations

import dataclasses
from urllib.parse import quote

import pytest

from pushserver.config import ConfigError, Settings, validate
from pushserver.core.errors import InvalidInput
from pushserver.core.names import parse_channels
from pushserver.core.positions import Cursor, Position
from pushserver.head_sizes import LONGEST_NAME, longest_cursor, longest_subscribe_target


def longest(channels: int) -> dict[str, Position]:
    """The longest cursor `core` formats for `channels` channels, its names all `:` and `@`
    (`n` in binary), which a browser's encodeURIComponent sends as three bytes each."""
    names = [
        f"{n:07b}".translate({48: ":", 49: "@"}).ljust(LONGEST_NAME, ":") for n in range(channels)
    ]
    return {name: Position("e" * 32, 10**18 - 1) for name in names}


@pytest.mark.parametrize("channels", [1, 2, 64])
def test_the_longest_cursor_is_the_longest_core_accepts(channels):
    positions = longest(channels)
    cursor = str(Cursor.of(positions))
    assert Cursor.parse(cursor).positions() == positions
    assert parse_channels(",".join(positions), channels) == tuple(positions)
    assert len(cursor) == longest_cursor(channels)
    encoded = quote(cursor, safe="")  # what encodeURIComponent sends for these characters
    assert len(encoded) == longest_cursor(channels, encoded=True)


@pytest.mark.parametrize(
    "part",
    ["n" * (LONGEST_NAME + 1) + ":e:1", "n:" + "e" * 33 + ":1", "n:e:" + "9" * 19],
)
def test_one_more_byte_anywhere_in_a_part_is_refused(part):
    with pytest.raises(InvalidInput):
        Cursor.parse(part)


def test_the_defaults_fit_the_longest_subscription():
    settings = Settings()
    target = longest_subscribe_target(settings.max_channels_per_subscription)
    assert validate(settings) is settings
    assert settings.max_line_size >= target
    assert settings.max_head_bytes >= settings.max_line_size + settings.max_field_size + 4096


def test_fewer_channels_allow_smaller_limits():
    small = Settings(
        max_channels_per_subscription=16,
        max_line_size=longest_subscribe_target(16),
        max_field_size=len("last-event-id") + longest_cursor(16),
        max_head_bytes=longest_subscribe_target(16)
        + len("last-event-id")
        + longest_cursor(16)
        + 4096,
    )
    assert validate(small) is small
    for name in ("max_line_size", "max_field_size", "max_head_bytes"):
        with pytest.raises(ConfigError, match=name.replace("_", "-")):
            validate(dataclasses.replace(small, **{name: getattr(small, name) - 1}))
