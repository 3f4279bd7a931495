"""Measure the compression schemes of issue 38 on realistic small messages, on this machine.

Bytes per delivered message for each transport and scheme (deterministic: the same messages
every run), the CPU each scheme costs per message and per delivery (timed, several rounds), and
the memory a per-connection compressor would hold. Run it on an otherwise idle machine:

    .venv/bin/python scripts/compression_schemes.py --rounds 5

It fails (exit 1) when a timed section did not have the CPU to itself: process time below 90 %
of wall time means something else ran, and its figures say nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import itertools
import os
import random
import socket
import statistics
import sys
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import orjson
import uvloop

from pushserver.core.messages import Message
from pushserver.wire import compression
from pushserver.wire.framing import NDJSON, SSE, SSE_COMPACT, longpoll_body
from pushserver.wire.websocket import TEXT, ws_frame

EPOCH = "70f05dee1"
START_TS = 1795375692.833052
NCHAN_SSE_OVERHEAD = 28
"""nginx+nchan's SSE event around a payload, `id: 1795736741:0\\ndata: ` and `\\n\\n`, captured
from the documented nchan.conf: its answer is close-delimited, no chunk framing."""
LONGPOLL_SETTINGS = [(6, 15, 8), (6, 12, 4), (1, 12, 4)]
assert (compression.LEVEL, compression.BODY_WINDOW_BITS, compression.MEM_LEVEL) in LONGPOLL_SETTINGS
"""(level, window bits, memLevel) tried for one-shot answers; the first is zlib's default."""
SETTINGS = [(6, 9, 1), (6, 10, 4), (6, 12, 5), (6, 15, 8), (1, 10, 4), (9, 10, 4)]
"""(level, window bits, memLevel) tried for every scheme."""
BUSY = 0.9
"""A timed section whose process time is below this share of its wall time is discarded."""
SPAN = 0.2
"""Seconds each timed section runs, at least."""


# -- realistic payloads ---------------------------------------------------------------------


def ticker(rng: random.Random) -> Iterator[tuple[str, object]]:
    price, volume = 187.23, 48_213_377
    while True:
        change = round(rng.gauss(0, 0.08), 2)
        price = round(price + change, 2)
        volume += rng.randrange(100, 5000)
        yield (
            "prices.AAPL",
            {
                "symbol": "AAPL",
                "price": price,
                "change": change,
                "volume": volume,
                "bid": round(price - 0.01, 2),
                "ask": round(price + 0.01, 2),
                "exchange": "NASDAQ",
            },
        )


WORDS = [
    "the",
    "build",
    "is",
    "green",
    "again",
    "can",
    "you",
    "check",
    "the",
    "staging",
    "logs",
    "before",
    "lunch",
    "we",
    "moved",
    "the",
    "review",
    "to",
    "three",
    "thanks",
    "for",
    "the",
    "quick",
    "fix",
    "I",
    "will",
    "merge",
    "it",
    "after",
    "the",
    "tests",
    "pass",
]


def chat(rng: random.Random) -> Iterator[tuple[str, object]]:
    authors = ["j.moreau", "a.okafor", "m.tanaka", "s.lindqvist"]
    minute = 0
    while True:
        minute += rng.randrange(0, 3)
        yield (
            "chat:support-emea",
            {
                "room": "support-emea",
                "author": rng.choice(authors),
                "text": " ".join(rng.choice(WORDS) for _ in range(rng.randrange(5, 9))),
                "sent_at": f"2026-11-26T10:{minute % 60:02d}:{rng.randrange(60):02d}Z",
            },
        )


def telemetry(rng: random.Random) -> Iterator[tuple[str, object]]:
    temperature, humidity, battery, seq = 21.7, 48.2, 87, 0
    while True:
        seq += 1
        temperature = round(temperature + rng.uniform(-0.2, 0.2), 1)
        humidity = round(humidity + rng.uniform(-0.5, 0.5), 1)
        battery -= rng.random() < 0.01
        yield (
            "devices.thermo-0042",
            {
                "device_id": "thermo-0042",
                "temperature_c": temperature,
                "humidity_pct": humidity,
                "battery_pct": battery,
                "status": "ok",
                "seq": seq,
            },
        )


def scores(rng: random.Random) -> Iterator[tuple[str, object]]:
    players = ["B. Saka", "C. Palmer", "M. Odegaard", "N. Jackson", "D. Rice"]
    events = ["shot", "corner", "foul", "goal", "save", "offside"]
    minute, home, away = 0, 0, 0
    while True:
        minute = min(90, minute + rng.randrange(0, 3))
        event = rng.choice(events)
        if event == "goal":
            home, away = (home + 1, away) if rng.random() < 0.5 else (home, away + 1)
        yield (
            "scores.epl",
            {
                "match_id": "ARS-CHE-2026-11-26",
                "minute": minute,
                "home_score": home,
                "away_score": away,
                "event": event,
                "player": rng.choice(players),
            },
        )


FAMILIES: dict[str, Callable[[random.Random], Iterator[tuple[str, object]]]] = {
    "ticker": ticker,
    "chat": chat,
    "telemetry": telemetry,
    "scores": scores,
}


@dataclass
class Sample:
    family: str
    messages: list[Message]

    def payload_bytes(self) -> float:
        return statistics.fmean(len(m.data) for m in self.messages)


def sample(family: str, count: int) -> Sample:
    rng = random.Random(family)
    source = FAMILIES[family](rng)
    messages = []
    for i in range(1, count + 1):
        channel, data = next(source)
        ts = START_TS + i * 0.05 + rng.random() * 0.01
        messages.append(Message(channel, EPOCH, i, ts, orjson.dumps(data)))
    return Sample(family, messages)


def frames(messages: list[Message], kind: str) -> list[bytes]:
    """Each message as its transport frames it, before transfer encoding."""
    out = []
    for m in messages:
        cursor = m.position.encode()
        if kind == "stream":
            out.append(NDJSON.event(m.body(cursor), cursor))
        elif kind == "sse":
            out.append(SSE.event(m.body(cursor), cursor))
        elif kind == "sse-compact":
            out.append(SSE_COMPACT.message(m.body(cursor), cursor, m.channel.encode(), m.data))
        else:
            out.append(m.body(cursor))
    return out


def coding(kind: str) -> compression.Coding:
    """The coding each transport would use: chunked HTTP with its heartbeat, or WebSocket
    frames (pings are not compressed)."""
    if kind == "ws":
        return compression.Coding(
            lambda block: ws_frame(0x40 | TEXT, compression.permessage_deflate(block))
        )
    framing = NDJSON if kind == "stream" else SSE
    return compression.Coding(NDJSON.chunk, framing.comment(b""))


def plain_wire(kind: str, frame: bytes) -> int:
    return len(ws_frame(TEXT, frame)) if kind == "ws" else len(NDJSON.chunk(frame))


# -- bytes ----------------------------------------------------------------------------------


def compressor(level: int, wbits: int, mem: int, zdict: bytes = b"") -> zlib._Compress:
    if zdict:
        return zlib.compressobj(level, zlib.DEFLATED, -wbits, mem, zlib.Z_DEFAULT_STRATEGY, zdict)
    return zlib.compressobj(level, zlib.DEFLATED, -wbits, mem)


def alone(level: int, wbits: int, mem: int, data: bytes) -> bytes:
    c = compressor(level, wbits, mem)
    return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)


def chained(level: int, wbits: int, mem: int, data: bytes, before: bytes) -> bytes:
    c = compressor(level, wbits, mem, before)
    return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)


def wire_bytes(kind: str, blocks: list[bytes]) -> float:
    wrap = coding(kind).wrap
    return statistics.fmean(len(wrap(b)) for b in blocks)


def through_stream(kind: str, fs: list[bytes], beats: int) -> tuple[float, float]:
    """Bytes per message (its heartbeats included) through one connection of this scheme, the
    messages `beats` heartbeats apart; and the same for a chain that heartbeats break."""
    code = coding(kind)
    chain = compression.Chain(code)
    stream = compression.GzipStream(code)
    kept = broken = 0
    for f in fs:
        frame = chain.add(f)
        for _ in range(beats):
            kept += len(stream.beat())
        kept += len(stream.take(frame))
        broken += len(frame.alone if beats else frame.after(0))
    heartbeats = len(code.heartbeat_block) * beats * (len(fs) - 1)
    return kept / len(fs), (broken + heartbeats) / len(fs)


def bytes_table(samples: list[Sample]) -> None:
    print("\n## Bytes on the wire per delivered message (transfer framing included)\n")
    print(
        "| payload | transport | identity | alone | chained | per-connection context | "
        "chained / identity | nchan SSE |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    level, wbits, mem = compression.LEVEL, compression.WINDOW_BITS, compression.MEM_LEVEL
    for s in samples:
        nchan = s.payload_bytes() + NCHAN_SSE_OVERHEAD
        for kind in ("stream", "sse", "sse-compact", "ws"):
            fs = frames(s.messages, kind)
            identity = statistics.fmean(plain_wire(kind, f) for f in fs)
            lone = wire_bytes(kind, [alone(level, wbits, mem, f) for f in fs])
            chain, _ = through_stream(kind, fs, 0)
            c = compressor(level, 15, 8)
            percon = wire_bytes(kind, [c.compress(f) + c.flush(zlib.Z_SYNC_FLUSH) for f in fs])
            print(
                f"| {s.family} ({s.payload_bytes():.0f} B) | {kind} | {identity:.1f} | "
                f"{lone:.1f} | {chain:.1f} | {percon:.1f} | {chain / identity:.0%} | {nchan:.0f} |"
            )


def sparse_table(samples: list[Sample]) -> None:
    print("\n## Sparse channels: SSE messages with heartbeats between, bytes per message\n")
    print("| payload | heartbeats between | identity | chain keeps heartbeats | chain broken |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for s in samples:
        fs = frames(s.messages, "sse")
        beat = len(NDJSON.chunk(SSE.comment(b"")))
        for beats in (1, 3):
            identity = statistics.fmean(plain_wire("sse", f) for f in fs) + beat * beats
            kept, broken = through_stream("sse", fs, beats)
            print(f"| {s.family} | {beats} | {identity:.1f} | {kept:.1f} | {broken:.1f} |")


def settings_table(samples: list[Sample]) -> None:
    print("\n## Chained SSE bytes per message by zlib settings (level, window bits, memLevel)\n")
    print("| settings | " + " | ".join(s.family for s in samples) + " |")
    print("| --- |" + " ---: |" * len(samples))
    for level, wbits, mem in SETTINGS:
        row = []
        for s in samples:
            fs = frames(s.messages, "sse")
            blocks = [chained(level, wbits, mem, f, b) for b, f in itertools.pairwise(fs)]
            row.append(f"{wire_bytes('sse', blocks):.1f}")
        print(f"| {level}, {wbits}, {mem} | " + " | ".join(row) + " |")


def gzip_once(level: int, wbits: int, mem: int, body: bytes) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 16 + wbits, mem)
    return c.compress(body) + c.flush()


def longpoll_table(samples: list[Sample], rounds: int) -> None:
    head = len(b"Content-Encoding: gzip\r\n")
    print(f"\n## Long-poll answers, one-shot gzip (best of {rounds} rounds)\n")
    print(f"Saved: body bytes saved less the {head}-byte `Content-Encoding` line.\n")
    print("| payload | messages | identity | settings | gzip | saved | saved % | CPU µs |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for s in samples:
        for count in (1, 2, 3, 5, 10, 20):
            part = s.messages[100 : 100 + count]
            body = longpoll_body([m.body(m.position.encode()) for m in part], part[-1].position)
            for level, wbits, mem in LONGPOLL_SETTINGS:
                packed = gzip_once(level, wbits, mem, body)
                assert zlib.decompress(packed, 31) == body

                cost = best_of(rounds, functools.partial(gzip_once, level, wbits, mem, body))
                saved = len(body) - len(packed) - head
                print(
                    f"| {s.family} | {count} | {len(body)} | {level}, {wbits}, {mem} | "
                    f"{len(packed)} | {saved} | {saved / len(body):.0%} | {cost * 1e6:.1f} |"
                )


# -- CPU ------------------------------------------------------------------------------------


class Busy(Exception):
    """Something else had the CPU while a section was timed."""


def timed(fn: Callable[[], object]) -> float:
    """Seconds per call of `fn`, called for at least `SPAN` seconds; raises Busy when the
    process did not have a CPU to itself meanwhile."""
    gc.collect()
    calls = 0
    wall, cpu = time.perf_counter(), time.process_time()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - wall
        if elapsed >= SPAN:
            break
    used = time.process_time() - cpu
    if used < BUSY * elapsed:
        raise Busy(f"process time {used:.3f} s of {elapsed:.3f} s wall: the machine was busy")
    return elapsed / calls


def best_of(rounds: int, fn: Callable[[], object]) -> float:
    return min(timed(fn) for _ in range(rounds))


Settings = tuple[int, int, int]


def run_alone(settings: Settings, fs: list[bytes]) -> None:
    for f in fs:
        alone(*settings, f)


def run_chained(settings: Settings, pairs: list[tuple[bytes, bytes]]) -> None:
    for b, f in pairs:
        chained(*settings, f, b)


def run_context(settings: Settings, fs: list[bytes]) -> None:
    c = compressor(*settings)
    for f in fs:
        c.compress(f)
        c.flush(zlib.Z_SYNC_FLUSH)


def cpu_table(samples: list[Sample], rounds: int) -> None:
    print(f"\n## CPU per SSE frame, µs (best of {rounds} rounds)\n")
    print(
        "alone and chained: made once per message, whatever the number of subscribers; "
        "per-connection context: paid for every delivery.\n"
    )
    print("| payload | settings | alone | chained | per-connection context |")
    print("| --- | --- | ---: | ---: | ---: |")
    for s in samples:
        fs = frames(s.messages, "sse")
        pairs = list(itertools.pairwise(fs))
        for level, wbits, mem in SETTINGS:
            settings = (level, wbits, mem)
            runs = (
                functools.partial(run_alone, settings, fs),
                functools.partial(run_chained, settings, pairs),
                functools.partial(run_context, settings, fs),
            )
            row = [best_of(rounds, fn) / len(fs) * 1e6 for fn in runs]
            cells = " | ".join(f"{v:.2f}" for v in row)
            print(f"| {s.family} | {level}, {wbits}, {mem} | {cells} |")


def delivery_table(samples: list[Sample], rounds: int) -> None:
    """What each delivery adds to a subscriber in the fan-out loop, against the write itself."""
    fs = frames(samples[0].messages, "sse")
    code = coding("sse")
    chain = compression.Chain(code)
    shared = [chain.add(f) for f in fs]
    for d in shared:  # both forms made once per message, before the loop over subscribers
        d.after(0)
        d.after(-1)
    subscribers = 200
    streams = [compression.GzipStream(code) for _ in range(subscribers)]
    receivers = [compression.Receiver(code) for _ in range(subscribers)]
    own = [compression.GzipStream(code) for _ in range(20)]

    def gzip_take() -> None:
        for d in shared:
            for st in streams:
                st.take(d)

    def chain_take() -> None:
        for d in shared:
            for r in receivers:
                r.take(d)

    def crc_only() -> None:
        for d in shared:
            data = d.data
            for st in streams:
                st.crc = zlib.crc32(data, st.crc)

    def own_frames() -> None:
        for f in fs:
            for st in own:
                st.own(f)

    shared_n, own_n = len(shared) * subscribers, len(fs) * len(own)
    print(f"\n## Per delivery, ns (best of {rounds} rounds)\n")
    print("| work | ns per delivery |")
    print("| --- | ---: |")
    for name, fn, n in (
        ("GzipStream.take: chain pick, CRC-32, length", gzip_take, shared_n),
        ("Receiver.take: chain pick only (WebSocket)", chain_take, shared_n),
        ("zlib.crc32 of the frame", crc_only, shared_n),
        ("GzipStream.own: a frame deflated for one connection", own_frames, own_n),
    ):
        print(f"| {name} | {best_of(rounds, fn) / n * 1e9:.0f} |")
    write = socket_write_ns(fs, rounds)
    print(f"| uvloop transport.write of the frame, loopback TCP | {write:.0f} |")


def tcp_pair(listener: socket.socket) -> tuple[socket.socket, socket.socket]:
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    return server, client


def socket_write_ns(fs: list[bytes], rounds: int) -> float:
    """What a delivery costs today: the frame written to a uvloop transport over a loopback TCP
    connection, as the fan-out writes it, and the loop turn after it, in which uvloop sends what
    each transport was given (the reading side drained between rounds, off the clock)."""

    async def run() -> float:
        loop = asyncio.get_running_loop()
        with socket.create_server(("127.0.0.1", 0)) as listener:
            pairs = [tcp_pair(listener) for _ in range(100)]
        transports = []
        for a, _b in pairs:
            t, _p = await loop.create_connection(asyncio.Protocol, sock=a)
            transports.append(t)
        chunked = [NDJSON.chunk(f) for f in fs[:100]]
        best = float("inf")
        for _ in range(rounds):
            wall, cpu = time.perf_counter(), time.process_time()
            for frame in chunked:
                for t in transports:
                    t.write(frame)
                await asyncio.sleep(0)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if cpu < BUSY * wall:
                raise Busy(f"process time {cpu:.3f} s of {wall:.3f} s wall: the machine was busy")
            if any(t.get_write_buffer_size() for t in transports):
                raise Busy("a socket buffer filled up: the figure would include buffering")
            best = min(best, wall / (len(chunked) * len(transports)))
            for _a, b in pairs:
                b.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    while b.recv(1 << 20):
                        pass
        for t in transports:
            t.close()
        for _a, b in pairs:
            b.close()
        return best * 1e9

    return uvloop.run(run())


# -- memory ---------------------------------------------------------------------------------


def memory_table() -> None:
    print("\n## Memory a per-connection compressor holds (zlib's allocations, tracemalloc)\n")
    print("| window bits, memLevel | bytes per connection |")
    print("| --- | ---: |")
    for wbits, mem in ((9, 1), (10, 4), (12, 5), (15, 8)):
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        kept = [compressor(6, wbits, mem) for _ in range(100)]
        for c in kept:
            c.compress(b"x" * 200)
            c.flush(zlib.Z_SYNC_FLUSH)
        used = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
        tracemalloc.stop()
        print(f"| {wbits}, {mem} | {used:,.0f} |")
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    code = coding("sse")
    streams = [compression.GzipStream(code) for _ in range(1000)]
    for st in streams:
        st.take(compression.Deflated(b"x" * 200, None, code))
        st.crc, st.size = 0xFFFFFFFF, 1 << 40  # ints as large as they get
    used = (tracemalloc.get_traced_memory()[0] - before) / len(streams)
    tracemalloc.stop()
    print(f"| GzipStream (this scheme) | {used:,.0f} |")


def machine() -> str:
    load = os.getloadavg()
    return f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=2000, help="messages per payload family")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (the best is kept)")
    parser.add_argument("--bytes-only", action="store_true", help="skip the timed sections")
    args = parser.parse_args(argv)
    if args.messages < 200 or args.rounds < 1:
        parser.error("--messages must be at least 200 and --rounds at least 1")
    print(f"# compression schemes, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {machine()}")
    print(f"python {sys.version.split()[0]}, zlib {zlib.ZLIB_RUNTIME_VERSION}")
    samples = [sample(family, args.messages) for family in FAMILIES]
    bytes_table(samples)
    settings_table(samples)
    sparse_table(samples)
    memory_table()
    if args.bytes_only:
        return 0
    try:
        longpoll_table(samples, args.rounds)
        cpu_table(samples, args.rounds)
        delivery_table(samples, args.rounds)
    except Busy as exc:
        print(f"\nFAILED: {exc}", file=sys.stderr)
        return 1
    print(f"\n# done, {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
