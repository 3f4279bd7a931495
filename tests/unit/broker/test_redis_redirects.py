"""A publish while its slot migrates (`shard.Shard._redirected`, `redirect.retry`): a script a
cluster answered ASK, TRYAGAIN or MOVED ran nowhere, so it is sent again where the answer says,
within `Plan.moving_wait`, instead of the publish being refused with 503; after ASK, `ASKING`
goes first on the same connection. Its notification still goes to the slot's owner until the
slot has left it (MOVED), then to the new owner; one Redis refuses otherwise comes after the
store, so the publish's outcome is unknown (`Unnotified`), never "not published". A read's
calls (and an epoch end's) that a redirect stopped follow it, each alone; the others' replies
are kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError

from pushserver.broker.redis import redirect
from pushserver.broker.redis.pipe import Arg, Script
from pushserver.broker.redis.scripts import TaggedKeys
from pushserver.broker.redis.shard import NotDurable, Plan, Shard, Unnotified
from pushserver.core.broker import Item

REPLY = [[[b"e", 1, b"1.0", 0]], [b"topic", b"payload"]]
"""The publish script's answer for one item: its id, and one notification."""


class Writer:
    """A publishing connection that answers each script call with the next of `answers` (an
    exception is raised) and keeps every other command."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.scripts = 0
        self.commands: list[tuple[Arg, ...]] = []

    async def script(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        self.scripts += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def call(self, *command: Arg) -> Any:
        self.commands.append(command)
        if command[0] == "WAIT":
            return 1
        answer = self.answers.pop(0) if self.answers else 1
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def aclose(self) -> None:
        pass


class Pipeline:
    """Its script calls are answered with the next of the client's `answers` each, in order."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.commands: list[tuple[Any, ...]] = []

    def execute_command(self, *command: Any) -> None:
        self.commands.append(command)

    def evalsha(self, *command: Any) -> None:
        self.commands.append(("EVALSHA", *command))

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        self.client.pipelines.append([c[0] for c in self.commands])
        replies = [
            b"OK" if c[0] == "ASKING" else self.client.acked if c[0] == "WAIT" else None
            for c in self.commands
        ]
        for n, command in enumerate(self.commands):
            if command[0] in ("EVAL", "EVALSHA"):
                replies[n] = self.client.answers.pop(0)
        errors = [r for r in replies if isinstance(r, Exception)]
        if errors and raise_on_error:
            raise errors[0]
        return replies


class Client:
    """A read client whose pipelines answer the script with the next of `answers`."""

    def __init__(self, *answers: Any, acked: int = 1) -> None:
        self.answers = list(answers)
        self.acked = acked
        self.pipelines: list[list[str]] = []

    def pipeline(self, transaction: bool = True) -> Pipeline:
        return Pipeline(self)


MOVING_WAIT = 10.0


def cluster(*shards: tuple[str, Writer, Client], wait: float = MOVING_WAIT) -> dict[str, Shard]:
    found: dict[str, Shard] = {}
    plan = Plan(
        TaggedKeys(0),
        Script("p"),
        Script("s"),
        Script("e"),
        "SPUBLISH",
        1,
        10,
        1000,
        2000,
        16,
        lambda: "",
        found.get,
        wait,
    )
    for name, writer, client in shards:
        found[name] = Shard(name, plan, cast(Any, client), writer, cast(Any, None))
    return found


async def publish(shard: Shard) -> list[Any]:
    return await shard.publishing(0).submit([Item("news", b"1", None)])


def test_what_each_redirect_asks() -> None:
    assert redirect.retry(MovedError("12 10.0.0.2:7001")) == ("10.0.0.2:7001", False, 0.0)
    assert redirect.retry(AskError("12 10.0.0.2:7001")) == ("10.0.0.2:7001", True, 0.0)
    assert redirect.retry(TryAgainError()) == ("", False, redirect.PAUSE)
    assert redirect.retry(ClusterDownError("down")) is None
    assert redirect.retry(NotDurable("0 of 1")) is None


async def test_a_script_answered_ask_runs_on_the_importing_primary_after_asking() -> None:
    source, target = Writer(AskError("12 h:2")), Writer()
    shards = cluster(("h:1", source, Client()), ("h:2", target, Client(REPLY)))
    assert await publish(shards["h:1"]) == REPLY[0]
    assert cast(Client, shards["h:2"].client).pipelines == [["ASKING", "EVAL", "WAIT"]]
    assert target.scripts == 0  # off the importing primary's own publishing connection
    assert source.commands == [("SPUBLISH", b"topic", b"payload")]  # the source still serves it


async def test_a_script_answered_tryagain_is_sent_again_until_the_keys_have_moved() -> None:
    source = Client(TryAgainError(), AskError("12 h:2"))  # the call sent again goes here
    shards = cluster(("h:1", Writer(TryAgainError()), source), ("h:2", Writer(), Client(REPLY)))
    assert await publish(shards["h:1"]) == REPLY[0]
    assert source.pipelines == [["EVAL", "WAIT"]] * 2
    assert cast(Client, shards["h:2"].client).pipelines == [["ASKING", "EVAL", "WAIT"]]


async def test_a_moved_slot_is_published_to_and_notified_on_its_new_owner() -> None:
    old, new = Writer(MovedError("12 h:2"), MovedError("12 h:2")), Writer()
    shards = cluster(("h:1", old, Client()), ("h:2", new, Client(REPLY)))
    assert await publish(shards["h:1"]) == REPLY[0]
    assert cast(Client, shards["h:2"].client).pipelines == [["EVAL", "WAIT"]]
    assert new.commands == [("SPUBLISH", b"topic", b"payload")]


async def test_redirects_are_followed_for_the_migration_wait_then_answered() -> None:
    client = Client(*[TryAgainError()] * 1000)
    shards = cluster(("h:1", Writer(TryAgainError()), client), wait=0.1)
    with pytest.raises(TryAgainError):
        await publish(shards["h:1"])
    assert 1 <= len(client.pipelines) < 1000


async def test_a_redirect_to_an_unknown_primary_or_unheld_by_replicas_is_refused() -> None:
    shards = cluster(("h:1", Writer(AskError("12 h:9")), Client()))
    with pytest.raises(AskError):
        await publish(shards["h:1"])
    unheld = Client(REPLY, acked=0)
    shards = cluster(("h:1", Writer(AskError("12 h:2")), Client()), ("h:2", Writer(), unheld))
    with pytest.raises(NotDurable):
        await publish(shards["h:1"])


async def test_a_publish_waits_on_the_importing_primary_until_the_slot_has_moved() -> None:
    """What a migration answers in practice: the target refuses the script after ASKING while
    a key it names is missing (TRYAGAIN), until the source gives the slot up (MOVED)."""
    source = Client(AskError("12 h:2"), MovedError("12 h:2"))
    target = Client(TryAgainError(), TryAgainError(), REPLY)
    shards = cluster(("h:1", Writer(AskError("12 h:2")), source), ("h:2", Writer(), target))
    assert await publish(shards["h:1"]) == REPLY[0]
    assert source.pipelines == [["EVAL", "WAIT"]] * 2
    assert target.pipelines == [["ASKING", "EVAL", "WAIT"]] * 2 + [["EVAL", "WAIT"]]


async def test_a_read_whose_slot_moves_follows_the_redirects_call_by_call() -> None:
    """A read's pipeline a redirect stopped for one call: that call goes where the cluster
    says, as a publish's does, without being sent here again first; the other call ran, and its
    reply is kept. A read no longer answers 503 while a slot moves."""
    source = Client(AskError("12 h:2"), [b"other"], MovedError("12 h:2"))
    target = Client(TryAgainError(), [b"synced"])
    shards = cluster(("h:1", Writer(), source), ("h:2", Writer(), target))
    read = await shards["h:1"].read(["news", "other"], [("e", 0), ("e", 0)])
    assert read == [[b"synced"], [b"other"]]
    assert source.pipelines == [["EVALSHA", "EVALSHA", "WAIT"], ["EVAL", "WAIT"]]
    assert target.pipelines == [["ASKING", "EVAL", "WAIT"], ["EVAL", "WAIT"]]


async def test_a_read_with_another_error_is_refused_and_nothing_is_followed() -> None:
    source = Client(AskError("12 h:2"), ClusterDownError("down"))
    shards = cluster(("h:1", Writer(), source), ("h:2", Writer(), Client()))
    with pytest.raises(ClusterDownError):
        await shards["h:1"].read(["news", "other"], [("e", 0), ("e", 0)])
    assert cast(Client, shards["h:2"].client).pipelines == []


async def test_a_notification_refused_after_the_store_is_an_unknown_outcome() -> None:
    """The script ran and its replicas hold it; then the cluster refuses the notification
    (CLUSTERDOWN, a MOVED to a primary the slot map lacks): the publish was made, so it must
    not be answered as "not published" (503) but as unknown (504): a keyed retry finds it."""
    for refusal in (ClusterDownError("down"), MovedError("12 h:9")):
        shards = cluster(("h:1", Writer(REPLY, refusal), Client()))
        with pytest.raises(Unnotified) as raised:
            await publish(shards["h:1"])
        assert raised.value.__cause__ is refusal


async def test_a_read_past_the_migration_wait_is_answered_with_the_last_redirect() -> None:
    shards = cluster(("h:1", Writer(), Client(*[TryAgainError()] * 1000)), wait=0.1)
    with pytest.raises(TryAgainError):
        await shards["h:1"].read(["news"], [("e", 0)])
