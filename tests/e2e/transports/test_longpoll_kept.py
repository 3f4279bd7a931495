"""A plain one-channel long-poll answered on a keep-alive connection is kept by that connection
for its next poll: a re-poll with the cursor its channel is at is held again as it is, without
opening the channel or building a poll. Anything else gives the kept poll's channels back,
once, and the limits count it like any new poll."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from urllib.parse import quote

import pytest

from pushserver.core.hub import Hub
from pushserver.core.positions import Position
from pushserver.core.subscription import LocalChannel
from pushserver.core.tokens import mint
from pushserver.web import publishing
from pushserver.web.front.repoll import Repeat, Repeats
from pushserver.web.http.parser import HeadParser
from pushserver.web.state import ServerState

from ...inprocess import in_process, publish, serving, until
from ...inprocess import poll as poll_on
from ...redis_fixture import redis_server_fixture  # noqa: F401

SECRET = "kept-secret-" + "0123456789abcdef" * 3
Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def connect(port: int) -> Conn:
    return await asyncio.open_connection("127.0.0.1", port)


async def poll(conn: Conn, target: str) -> tuple[int, dict]:
    return await poll_on(*conn, target)


async def head_cursor(conn: Conn, channel: str) -> str:
    status, answer = await poll(conn, f"/lp/{channel}?timeout=0")
    assert status == 200
    return answer["cursor"]


def waiters(state: ServerState, channel: str) -> set[object]:
    ch = state.hub.channels.get(channel)
    return set() if ch is None else set(ch.waiters)


def held(state: ServerState) -> int:
    return state.admission.connections["longpoll"]


def resting(state: ServerState, conn: Conn) -> bool:
    """Whether `conn` rests in the door, kept alive between requests (`admission.HeadGuard`)."""
    port = conn[1].get_extra_info("sockname")[1]
    return any(p.transport.get_extra_info("peername")[1] == port for p in state.heads.resting)


def sent(cursor: str, encoded: bool) -> str:
    """A cursor as a client puts it in its query: as it is, or as `encodeURIComponent` does."""
    return quote(cursor, safe="!'()*") if encoded else cursor


async def answered_once(
    state: ServerState, port: int, channel: str, encoded: bool = False
) -> tuple[Conn, object, dict]:
    """A connection whose poll of `channel` (published to once) was held and then answered
    with message 1: the connection, the poll that was held, the answer."""
    await publish(port, channel, "start")
    conn = await connect(port)
    cursor = sent(await head_cursor(conn, channel), encoded)
    task = asyncio.create_task(poll(conn, f"/lp/{channel}?timeout=20&cursor={cursor}"))
    await until(lambda: len(waiters(state, channel)) == 1, "the poll held")
    (waiter,) = waiters(state, channel)
    assert held(state) == 1
    await publish(port, channel, 1)
    status, answer = await task
    assert (status, [m["data"] for m in answer["messages"]]) == (200, [1])
    # Answered, it awaits its re-poll: still counted as held, not resting in the door.
    assert held(state) == 1 and not resting(state, conn)
    return conn, waiter, answer


class BookedHub(Hub):
    """A hub that counts, per channel, every open less every release (`books`): 0 once each
    subscription gave its channels back exactly once."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.books: collections.Counter[str] = collections.Counter()

    def open_now(
        self, names: Sequence[str], positions: Mapping[str, Position]
    ) -> list[LocalChannel] | None:
        found = super().open_now(names, positions)
        if found is not None:
            self.books.update(names)
        return found

    async def open(
        self, names: Sequence[str], positions: Mapping[str, Position]
    ) -> list[LocalChannel]:
        found = await super().open(names, positions)
        self.books.update(names)
        return found

    def release(self, channels: Iterable[LocalChannel]) -> None:
        channels = list(channels)
        self.books.subtract(ch.name for ch in channels)
        super().release(channels)


def channel_books(state: ServerState) -> collections.Counter[str]:
    """The books of a server started with `BookedHub`."""
    assert isinstance(state.hub, BookedHub)
    return state.hub.books


@pytest.fixture(params=["memory", "redis"])
def broker(request: pytest.FixtureRequest) -> dict[str, object]:
    """The settings of each broker: the memory engine, and Redis (a server of its own)."""
    if request.param == "memory":
        return {}
    return {"redis": request.getfixturevalue("redis_server").url}


@contextlib.contextmanager
def polls_parsed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """The long-poll heads the server parses meanwhile (a re-poll it matched by its bytes is
    not parsed)."""
    parsed: list[bytes] = []
    parse = HeadParser.parse

    def counted(self: HeadParser, raw: bytes) -> object:
        if raw.startswith(b"GET /lp/"):
            parsed.append(raw)
        return parse(self, raw)

    with monkeypatch.context() as patch:
        patch.setattr(HeadParser, "parse", counted)
        yield parsed


@pytest.mark.parametrize("encoded", [False, True], ids=["plain", "percent-encoded"])
async def test_a_repoll_at_the_channel_head_is_held_by_the_same_poll(
    broker: dict, encoded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its cursor as it is or percent-encoded (browsers, the JS and Java clients): matched by
    its bytes either way, not parsed."""
    async with in_process(**broker) as (state, _, port):
        conn, waiter, answer = await answered_once(state, port, "kept", encoded)
        cursor = sent(answer["cursor"], encoded)
        with polls_parsed(monkeypatch) as parsed:
            again = asyncio.create_task(poll(conn, f"/lp/kept?timeout=20&cursor={cursor}"))
            await until(lambda: len(waiters(state, "kept")) == 1, "the re-poll held")
        assert parsed == []
        assert waiters(state, "kept") == {waiter}  # held again as it was
        assert held(state) == 1
        await publish(port, "kept", 2)
        status, answer = await again
        assert (status, [m["data"] for m in answer["messages"]]) == (200, [2])
        assert answer["cursor"].endswith(":3")
        conn[1].close()


async def test_encoded_repolls_after_a_first_poll_with_no_cursor_are_matched_by_their_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The JS client's way: a first poll with an empty cursor shows nothing of how the client
    escapes one; its first re-poll does (read from the head remembered, not parsed), and the
    re-polls after it are matched whole with the cursor their kept poll awaits."""
    read: list[bytes] = []

    class Read(Repeat):
        """Records each head a value is read from."""

        def value(self, raw: bytes) -> str | None:
            read.append(raw)
            return super().value(raw)

    async with serving() as started:
        state = started.state
        started.front.repeats = Repeats(state.settings.max_line_size, Read)
        port = started.listener.sockets[0].getsockname()[1]
        await publish(port, "first", "start")
        conn = await connect(port)
        cursor = ""
        for n in range(4):
            read.clear()
            with polls_parsed(monkeypatch) as parsed:
                task = asyncio.create_task(poll(conn, f"/lp/first?timeout=20&cursor={cursor}"))
                await until(lambda: len(waiters(state, "first")) == 1, "the poll held")
            assert (len(parsed), len(read)) == [(1, 0), (0, 1), (0, 0), (0, 0)][n]
            await publish(port, "first", n)
            status, answer = await task
            assert (status, [m["data"] for m in answer["messages"]]) == (200, [n])
            cursor = sent(answer["cursor"], True)
        conn[1].close()


@pytest.mark.parametrize("encoded", [False, True], ids=["plain", "percent-encoded"])
async def test_a_repoll_behind_the_head_gets_what_was_published_meanwhile(
    broker: dict, encoded: bool
) -> None:
    async with in_process(**broker) as (state, _, port):
        conn, waiter, answer = await answered_once(state, port, "behind", encoded)
        await publish(port, "behind", 2)  # while the connection is between polls
        await publish(port, "behind", 3)
        ch = state.hub.channels["behind"]
        await until(lambda: ch.sent_id == 4, "both fanned out (ids 3 and 4; 1 and 2 before)")
        cursor = sent(answer["cursor"], encoded)
        status, answer = await poll(conn, f"/lp/behind?timeout=20&cursor={cursor}")
        assert (status, [m["data"] for m in answer["messages"]]) == (200, [2, 3])
        cursor = sent(answer["cursor"], encoded)
        task = asyncio.create_task(poll(conn, f"/lp/behind?timeout=20&cursor={cursor}"))
        await until(lambda: len(waiters(state, "behind")) == 1, "the next poll held")
        assert waiters(state, "behind") == {waiter}  # answered, then held again, as it was
        await publish(port, "behind", 4)
        status, answer = await task
        assert (status, [m["data"] for m in answer["messages"]]) == (200, [4])
        conn[1].close()


async def test_a_kept_poll_one_message_behind_answers_as_a_new_poll_would(broker: dict) -> None:
    """The one-to-one client's re-poll, read after the publish it raced with: byte for byte
    what a connection with nothing kept gets, message after message."""
    async with in_process(**broker) as (state, _, port):
        conn, _, answer = await answered_once(state, port, "one")
        fresh = await connect(port)
        ch = state.hub.channels["one"]
        for n in range(2, 5):
            await publish(port, "one", n)
            await until(lambda id_=n + 1: ch.sent_id == id_, "fanned out (to no one held)")
            target = f"/lp/one?timeout=20&cursor={answer['cursor']}"
            status, answer = await poll(conn, target)
            assert (status, answer) == await poll(fresh, target)
            assert [m["data"] for m in answer["messages"]] == [n]
            assert answer["cursor"] == ch.sent_position
        for _, writer in (conn, fresh):
            writer.close()


async def test_kept_polls_behind_the_head_answer_as_new_polls_would():
    """Behind by messages still buffered, within `?limit` (the rest waiting), by more than the
    history holds (a gap first), and past the head (refused): byte for byte what a connection
    with nothing kept gets for the same request."""
    async with in_process(BookedHub, history_size=3) as (state, _, port):
        await publish(port, "gap", "start")
        books = channel_books(state)
        heads = ["/lp/gap?timeout=20&cursor=", "/lp/gap?timeout=20&limit=1&cursor="] * 2
        conns = [await connect(port) for _ in heads]
        head = await head_cursor(conns[0], "gap")
        pairs = zip(conns, heads, strict=True)
        tasks = [asyncio.create_task(poll(c, h + head)) for c, h in pairs]
        await until(lambda: held(state) == 4, "four polls held")
        assert books == {"gap": 4}  # each open counted, the head's given back
        await publish(port, "gap", 1)
        cursor = {(await t)[1]["cursor"] for t in tasks}.pop()
        assert held(state) == 4  # answered, awaiting their re-polls
        fresh = await connect(port)

        async def same_as_fresh(i: int, cursor: str) -> dict:
            answer = await poll(conns[i], heads[i] + cursor)
            assert answer == await poll(fresh, heads[i] + cursor)
            return answer[1]

        await publish(port, "gap", 2)
        await publish(port, "gap", 3)
        answer = await same_as_fresh(0, cursor)
        assert ([m["data"] for m in answer["messages"]], answer.get("more")) == ([2, 3], None)
        answer = await same_as_fresh(1, cursor)
        assert ([m["data"] for m in answer["messages"]], answer.get("more")) == ([2], True)
        for n in range(4, 8):
            await publish(port, "gap", n)
        answer = await same_as_fresh(2, cursor)  # 2 to 4 are gone: a gap first
        assert answer["messages"][0]["type"] == "gap"
        assert [m.get("data") for m in answer["messages"][1:]] == [5, 6, 7]
        error = await same_as_fresh(3, cursor.rpartition(":")[0] + ":99")
        assert error["error"] == "bad_cursor"
        for _, writer in [*conns, fresh]:
            writer.close()
        await until(lambda: not +books and not -books, "every open channel given back")


async def test_every_poll_gives_its_channels_back_once_however_its_connection_goes_on(
    broker: dict,
) -> None:
    async with in_process(BookedHub, **broker) as (state, _, port):
        await publish(port, "books", "start")
        books = channel_books(state)
        conns = [await connect(port) for _ in range(4)]
        cursor = await head_cursor(conns[0], "books")
        tasks = [
            asyncio.create_task(poll(c, f"/lp/books?timeout=20&cursor={cursor}")) for c in conns
        ]
        await until(lambda: held(state) == 4, "four polls held")
        assert books == {"books": 4}  # each open counted, the head's given back
        await publish(port, "books", 1)
        cursors = [(await t)[1]["cursor"] for t in tasks]
        assert held(state) == 4  # answered, awaiting their re-polls
        # 0: re-polls at the head (kept and held again), answered by a publish.
        # 1: another request on the connection first, then a re-poll.
        # 2: a re-poll with the cursor of the poll before (behind the head).
        # 3: closed while between polls.
        again = asyncio.create_task(poll(conns[0], f"/lp/books?timeout=20&cursor={cursors[0]}"))
        status, _ = await poll(conns[1], "/lp/other?timeout=0")
        assert status == 200
        late = asyncio.create_task(poll(conns[1], f"/lp/books?timeout=20&cursor={cursors[1]}"))
        status, answer = await poll(conns[2], f"/lp/books?timeout=20&cursor={cursor}")
        assert [m["data"] for m in answer["messages"]] == [1]
        conns[3][1].close()
        await until(lambda: len(waiters(state, "books")) == 2, "two re-polls held")
        await until(lambda: held(state) == 3, "3 gone; 2 answered, awaiting its re-poll")
        await publish(port, "books", 2)
        for task in (again, late):
            status, answer = await task
            assert (status, [m["data"] for m in answer["messages"]]) == (200, [2])
        for _, writer in conns[:3]:
            writer.close()
        await until(lambda: not +books and not -books, "every open channel given back")
        await until(lambda: held(state) == 0, "every slot given back")


async def test_kept_polls_keep_their_slots_against_the_connection_limit():
    """Against --max-connections 5: five held polls fill it and new connections' polls are
    refused; answered, the five keep their slots while they await their re-polls (the others
    still refused), and their re-polls are held again without counting twice; two of them
    closing give two slots back, which two of the others take while three are refused. Every
    refused poll gives its channel back. (Publishes go to the hub: a publisher's connection
    would count too.)"""
    async with in_process(BookedHub, max_connections=5) as (state, _, port):

        async def put(data: int) -> None:
            await publishing.publish(
                state, publishing.one_item("cap", b"%d" % data, None, True), False
            )

        await publish(port, "cap", "start")
        books = channel_books(state)
        kept: list[Conn] = []
        for _ in range(5):  # one at a time: a connection waiting for its next request
            kept.append(await connect(port))  # counts as an unfinished head (security.md)
            head = await head_cursor(kept[-1], "cap")

        def polls(group: list[Conn], cursor: str) -> list[asyncio.Task]:
            return [
                asyncio.create_task(poll(c, f"/lp/cap?timeout=20&cursor={cursor}")) for c in group
            ]

        async def refused(group: list[Conn], cursor: str) -> None:
            for c in group:
                status, answer = await poll(c, f"/lp/cap?timeout=20&cursor={cursor}")
                assert (status, answer["error"]) == (503, "over_capacity")

        held_kept = polls(kept, head)
        await until(lambda: held(state) == 5, "the kept polls held")
        assert books == {"cap": 5}  # each open counted, the head's given back
        others = [await connect(port) for _ in range(5)]
        await refused(others, head)
        await put(1)
        answers = [await t for t in held_kept]
        assert [(s, [m["data"] for m in a["messages"]]) for s, a in answers] == [(200, [1])] * 5
        head = answers[0][1]["cursor"]
        assert held(state) == 5  # answered, awaiting their re-polls
        await refused(others, head)
        held_kept = polls(kept, head)
        await until(lambda: len(waiters(state, "cap")) == 5, "the re-polls held again")
        assert held(state) == 5
        for task, (_, writer) in zip(held_kept[:2], kept[:2], strict=True):
            task.cancel()
            writer.close()
        await until(lambda: held(state) == 3, "two slots given back")
        tasks = polls(others, head)
        await until(lambda: len(waiters(state, "cap")) == 5, "two others held")
        await until(lambda: sum(t.done() for t in tasks) == 3, "the others refused")
        await put(2)
        answers = [await t for t in [*held_kept[2:], *tasks]]
        statuses = collections.Counter(status for status, _ in answers)
        assert statuses == {200: 5, 503: 3}, answers
        for status, answer in answers:
            if status == 200:
                assert [m["data"] for m in answer["messages"]] == [2]
            else:
                assert answer["error"] == "over_capacity"
        for _, writer in kept[2:] + others:
            writer.close()
        await until(lambda: not +books and not -books, "every open channel given back")
        await until(lambda: held(state) == 0, "every slot given back")


async def test_a_channel_nobody_published_to_is_not_kept_after_its_poll_times_out():
    async with in_process() as (state, _, port):
        conn = await connect(port)
        status, answer = await poll(conn, "/lp/quiet?timeout=0.2")
        assert (status, answer["messages"]) == (200, [])
        await until(lambda: "quiet" not in state.hub.channels, "the unstarted channel dropped")
        conn[1].close()


async def test_a_held_again_poll_is_cut_short_and_then_refused_when_its_token_expires():
    async with in_process(subscribe_secret=SECRET) as (_, _, port):
        token = mint(["tok"], 3, SECRET)
        conn = await connect(port)
        await publish(port, "tok", "start")
        cursor = (await poll(conn, f"/lp/tok?timeout=0&token={token}"))[1]["cursor"]
        statuses = []
        for _ in range(10):  # each hold ends at the token's expiry (3 s) at the latest
            status, answer = await poll(conn, f"/lp/tok?timeout=1&token={token}&cursor={cursor}")
            statuses.append(status)
            if status != 200:
                break
            assert answer["messages"] == [] and answer["cursor"] == cursor
        assert statuses[-1] == 401 and answer["message"] == "subscribe token expired"
        assert set(statuses[:-1]) == {200} and len(statuses) >= 2
        conn[1].close()
