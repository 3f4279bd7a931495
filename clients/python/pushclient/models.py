"""What a subscriber receives and what a publisher gets back."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .errors import InvalidChannel

CHANNEL_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")
MAX_CHANNELS = 64


@dataclass(frozen=True, slots=True)
class Message:
    """One published message; `cursor` is where to resume so it is not received again."""

    channel: str
    id: int
    ts: float
    data: Any
    cursor: str


@dataclass(frozen=True, slots=True)
class Gap:
    """Messages `from_id`..`to_id` of `channel` are lost (`reason`: "expired" or "epoch").

    With reason "epoch" the ids belong to the channel's new history and `to_id < from_id`
    when nothing of it was lost; what the old history held after your cursor is unknowable.
    """

    channel: str
    from_id: int
    to_id: int
    reason: str
    cursor: str


@dataclass(frozen=True, slots=True)
class ServerHints:
    """Settings of the server that shape a subscription: its heartbeat interval (seconds) and
    the most events one long-poll answer carries."""

    heartbeat: float
    longpoll_max_messages: int


@dataclass(frozen=True, slots=True)
class PublishResult:
    """The server's receipt: the message's id and time, and how many subscribers it reached."""

    channel: str
    id: int
    ts: float
    subscribers: int


def check_channels(channels: str | Iterable[str]) -> list[str]:
    """Validate a subscription's channels locally, so a typo fails before any request."""
    names = [channels] if isinstance(channels, str) else list(channels)
    if not names:
        raise InvalidChannel("a subscription needs at least one channel")
    if len(names) > MAX_CHANNELS:
        raise InvalidChannel(f"a subscription names at most {MAX_CHANNELS} channels")
    if len(set(names)) != len(names):
        raise InvalidChannel("a subscription names each channel once")
    for name in names:
        check_channel(name)
    return names


def check_channel(name: str) -> str:
    if not isinstance(name, str) or not CHANNEL_RE.fullmatch(name):
        raise InvalidChannel(f"bad channel name {name!r}: use 1-128 of A-Z a-z 0-9 _ . : @ -")
    return name
