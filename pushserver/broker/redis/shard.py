"""One Redis primary as the engine uses it: script calls that publish, reads, and a pub/sub link.

One Redis is one shard; a Redis Cluster is one shard per primary, each holding the slots the
cluster gives it. Publishes to a shard go out one script call at a time on one connection
(`Coalescer`), so when replicas must hold a call before anyone sees it, `WAIT` on that
connection covers the whole call; its notifications are sent only then.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MovedError,
    NoScriptError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from ...core.broker import Item
from . import redirect
from .coalesce import Coalescer
from .link import DOWN_ERRORS, Link, bounded
from .pipe import Arg, Script
from .scripts import Keys

POOL_SIZE = 32
"""Redis connections per process for reads; publishes have a connection of their own (`pipe`)."""
REPLY_TIMEOUT = 5.0
CONNECT_TIMEOUT = 2.0
POOL_OPTIONS: dict[str, Any] = {
    "timeout": 5,
    "protocol": 2,
    "retry": Retry(NoBackoff(), 0),
    "socket_connect_timeout": CONNECT_TIMEOUT,
    "socket_timeout": REPLY_TIMEOUT,
}
"""Every connection the engines open: no retries (a timed-out script may have run: only the
caller's keyed retry is safe), bounded waits."""


def read_pool(url: str, size: int = POOL_SIZE, **options: Any) -> BlockingConnectionPool:
    return BlockingConnectionPool.from_url(url, max_connections=size, **POOL_OPTIONS, **options)


async def closed(client: Redis) -> None:
    await bounded(client.aclose())


NAMES_KEPT = 1024
"""Channels whose key names a shard keeps between publishes (`Shard._names`); past it they are
all dropped and made again as publishes come, so the table stays a few hundred KB at most."""

WAIT_TIMEOUT_MS = 1000
"""How long a publish or a read waits for its replicas before it is refused."""


class NotDurable(RedisError):
    """Fewer replicas than asked hold a script call: nobody may see what it wrote or read yet."""


class Unnotified(RedisError):
    """A publish's script call is stored (and held by its replicas), but Redis refused its
    notification (CLUSTERDOWN, a MOVED to a primary the slot map lacks): only a keyed retry
    can tell the publisher it was made, so it is answered as an unknown outcome."""


class Writer(Protocol):
    """The connection a shard's script calls go over (`pipe.Pipe`, or `OneConnection`)."""

    async def script(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any: ...

    async def call(self, *command: Arg) -> Any: ...

    async def aclose(self) -> None: ...


class OneConnection:
    """A `Writer` on redis-py: one connection (so `WAIT` follows the script on it), no retries."""

    def __init__(self, pool: BlockingConnectionPool) -> None:
        self.client = Redis(connection_pool=pool)

    async def script(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        try:
            return await self.client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await self.client.execute_command("EVAL", script.text, len(keys), *keys, *args)

    async def call(self, *command: Arg) -> Any:
        return await self.client.execute_command(*command)

    async def aclose(self) -> None:
        """A call under way fails (its outcome unknown), as the pipe's does."""
        await closed(self.client)


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """What every shard of an engine does alike."""

    keys: Keys
    publish: Script
    sync: Script
    end: Script
    notify: str
    """PUBLISH or SPUBLISH, sent after `WAIT`; '' when the publish script sends it itself."""
    replicas: int
    history_size: int
    history_ms: int
    meta_ms: int
    kept: int
    trusted: Callable[[], str]
    """The lineages the scripts may trust (LINEAGE_LUA), as of now."""
    node: Callable[[str], Shard | None]
    """The shard on the primary host:port, which a cluster's redirect names; None if none."""
    moving_wait: float
    """Seconds a call follows a cluster's redirects while its slot moves (`redirect`)."""


class Shard:
    """A primary: its read client, its publishing connection and its subscriber link."""

    def __init__(self, name: str, plan: Plan, client: Redis, writer: Writer, link: Link) -> None:
        self.name = name
        self.plan = plan
        self.client = client
        self.writer = writer
        self.link = link
        self._publishing: dict[int, Coalescer[Item, Any]] = {}
        self._names: dict[str, tuple[tuple[str, str, str], tuple[str, str]]] = {}
        """Per channel, its keys for a publish without an idempotency key and the shared keys
        of its slot: made once, not on every publish (four calls and three f-strings each)."""
        self._reading = asyncio.Semaphore(POOL_SIZE)
        """Reads wait their turn here, unbounded, not in the pool: its wait for a connection
        is bounded, and one past it (3,000 reads of 64 channels at once) reads as Redis down."""

    def publishing(self, slot: int) -> Coalescer[Item, Any]:
        """The publishes waiting for a script call to `slot`'s channels (see `coalesce`). The
        calls of every slot share the one connection, so `WAIT` after one covers it whatever
        other slot's call went between."""
        coalescer = self._publishing.get(slot)
        if coalescer is None:
            coalescer = self._publishing[slot] = Coalescer(self._run_publish)
        return coalescer

    async def _run_publish(self, items: list[Item]) -> list[Any]:
        """One script call for the items of every publish waiting (see `coalesce`); once
        replicas hold it, its notifications."""
        plan, keys, known = self.plan, self.plan.keys, self._names
        names: list[str] = []
        args: list[Any] = [
            secrets.token_hex(5),
            plan.history_size,
            plan.history_ms,
            plan.meta_ms,
            repr(time.time()),
            keys.prefix,
            plan.kept,
            plan.trusted(),
        ]
        for name, data, key in items:
            own, shared = known.get(name) or self._named(name)
            names += own if not key else (own[0], own[1], keys.seen(name, key))
            args += (name, data, key or "")
        names += shared  # the call's items share one slot, so they share its keys
        try:
            reply = await self.writer.script(plan.publish, names, args)
        except REDIRECTS as exc:
            reply = await self._redirected(exc, plan.publish, names, args)
            return reply if not plan.replicas else await self._notified(*reply)
        if not plan.replicas:
            return reply  # notified by the script itself
        self._held(await self.writer.call("WAIT", plan.replicas, WAIT_TIMEOUT_MS))
        return await self._notified(*reply)

    async def _notified(self, assigned: list[Any], notes: list[Arg]) -> list[Any]:
        """`assigned`, once the notifications of its call are sent (after `WAIT`). A lost
        connection is the link's to report (`DOWN_ERRORS`); any other refusal comes after the
        call was stored, so it is `Unnotified`, never "not published"."""
        try:
            await asyncio.gather(
                *(self._notify(t, p) for t, p in zip(notes[::2], notes[1::2], strict=True))
            )
        except DOWN_ERRORS:
            raise
        except RedisError as exc:
            raise Unnotified(f"stored, but its notification was refused: {exc}") from exc
        return list(assigned)

    async def _redirected(
        self, exc: RedisError, script: Script, names: Sequence[Arg], args: Sequence[Arg]
    ) -> Any:
        """`script`'s reply after a cluster redirected it (a migration: see `redirect`), once
        replicas hold it (`WAIT` sent with it), following redirects while the cluster keeps
        answering them, for `Plan.moving_wait` at most (a migration taken as stalled)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.plan.moving_wait
        while True:
            step = redirect.retry(exc)
            target = None if step is None else self.plan.node(step.node) if step.node else self
            if step is None or target is None or loop.time() + step.pause > deadline:
                raise exc
            await asyncio.sleep(step.pause)
            try:
                return await target._run_here(script, names, args, step.asking)
            except REDIRECTS as again:
                exc = again

    async def _run_here(
        self, script: Script, names: Sequence[Arg], args: Sequence[Arg], asking: bool
    ) -> Any:
        """`script` sent here whole (this primary may not have it yet), after `ASKING` if
        asked, then `WAIT`, all on one connection: a redirected call, so off the way of the
        publishing connection's own calls."""
        plan = self.plan
        pipe = self.client.pipeline(transaction=False)
        if asking:
            pipe.execute_command("ASKING")
        pipe.execute_command("EVAL", script.text, len(names), *names, *args)
        if plan.replicas:
            pipe.execute_command("WAIT", plan.replicas, WAIT_TIMEOUT_MS)
        async with self._reading:
            replies = await pipe.execute()
        if plan.replicas:
            self._held(replies.pop())
        return replies[-1]

    async def _notify(self, topic: Arg, payload: Arg) -> None:
        """Notify `topic`'s subscribers through this primary: while its slot moves it still
        serves the slot's shard channels; once the slot has left it (MOVED), the new owner."""
        try:
            await self.writer.call(self.plan.notify, topic, payload)
        except MovedError as exc:
            owner = self.plan.node(f"{exc.host}:{exc.port}")
            if owner is None:
                raise
            await owner.writer.call(self.plan.notify, topic, payload)

    def _named(self, name: str) -> tuple[tuple[str, str, str], tuple[str, str]]:
        keys = self.plan.keys
        if len(self._names) >= NAMES_KEPT:
            self._names.clear()
        meta, hist = keys.channel(name)
        named = self._names[name] = (meta, hist, keys.seen(name, "")), keys.shared(name)
        return named

    def _held(self, acked: Any) -> None:
        if int(acked) < self.plan.replicas:
            raise NotDurable(f"{acked} of {self.plan.replicas} replicas answered WAIT")

    async def read(self, names: Sequence[str], froms: Sequence[tuple[str, int]]) -> list[Any]:
        """The sync script's reply for each channel, all in one round trip (and `WAIT`)."""
        plan, trusted = self.plan, self.plan.trusted()
        calls = []
        for name, (epoch, after) in zip(names, froms, strict=True):
            args = (plan.meta_ms, after, plan.history_size, epoch, name, secrets.token_hex(5))
            calls.append((self._keys(name), (*args, plan.kept, trusted)))
        return await self._calls(plan.sync, calls)

    async def end_epochs(self, names: Sequence[str], seen: Sequence[tuple[str, int]]) -> None:
        """End each channel's epoch if Redis still holds it with fewer ids than were seen in it
        (`scripts.END_LUA_TEMPLATE`, detection by position); durable like a read."""
        plan = self.plan
        calls = [
            (self._keys(name), (epoch, last, secrets.token_hex(5), name, plan.kept))
            for name, (epoch, last) in zip(names, seen, strict=True)
        ]
        await self._calls(plan.end, calls)

    def _keys(self, name: str) -> tuple[str, ...]:
        """The keys of the sync and end scripts: the channel's own, then the shared ones."""
        return (*self.plan.keys.channel(name), *self.plan.keys.shared(name))

    async def _calls(
        self, script: Script, calls: Sequence[tuple[Sequence[Arg], Sequence[Arg]]]
    ) -> list[Any]:
        """`script` once per (keys, args), all in one round trip, then `WAIT` (its replies are
        used only once replicas hold what it read or wrote). The script goes by its digest, and
        whole only when Redis lacks it: a pipeline given redis-py's `Script` asks `SCRIPT
        EXISTS` first, a round trip more for every read. A call a cluster redirected (its slot
        is moving) ran nowhere, and goes on from where the redirect says; the others ran, and
        their replies are kept."""
        async with self._reading:
            replies = await self._pipeline(script, calls).execute(raise_on_error=False)
            if any(isinstance(reply, NoScriptError) for reply in replies):
                await self.client.script_load(script.text)
                replies = await self._pipeline(script, calls).execute(raise_on_error=False)
        moving = []
        for n, reply in enumerate(replies):
            if isinstance(reply, ResponseError):
                if redirect.retry(reply) is None:
                    raise reply
                moving.append(n)
        if self.plan.replicas:
            self._held(replies.pop())
        followed = await asyncio.gather(
            *(self._redirected(replies[n], script, *calls[n]) for n in moving)
        )
        for n, reply in zip(moving, followed, strict=True):
            replies[n] = reply
        return replies

    def _pipeline(
        self, script: Script, calls: Sequence[tuple[Sequence[Arg], Sequence[Arg]]]
    ) -> Pipeline:
        pipe = self.client.pipeline(transaction=False)
        for keys, args in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        if self.plan.replicas:
            pipe.execute_command("WAIT", self.plan.replicas, WAIT_TIMEOUT_MS)
        return pipe

    def subscribe(self, topic: bytes) -> asyncio.Future[None]:
        """Send SUBSCRIBE; the future is its confirmation (failed at once when not connected)."""
        confirmed = asyncio.get_running_loop().create_future()
        if not self.link.send("SUBSCRIBE", topic):
            fail(confirmed)
        return confirmed

    async def replication(self) -> tuple[str, int]:
        """The first 8 hex digits of this primary's `master_replid` (see LINEAGE_LUA), and how
        many replicas it has now."""
        info = await self.client.info("replication")
        return str(info["master_replid"])[:8], int(info.get("connected_slaves", 0))

    async def close(self, closing: Callable[[Redis], Awaitable[None]]) -> None:
        await self.link.close()
        await self.writer.aclose()
        await closing(self.client)


def fail(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_exception(RedisConnectionError("connection to Redis lost"))
        future.exception()  # retrieved: nobody may be waiting


REDIRECTS = (AskError, TryAgainError, ClusterDownError)
"""A cluster's answers that a command ran nowhere: its slot is elsewhere (MOVED, a kind of
AskError), moving (ASK, TRYAGAIN) or unserved."""
