"""What every engine does with the hub it reports to: hold it, and run while it is there."""

from __future__ import annotations

from types import TracebackType

from mypy_extensions import mypyc_attr

from ..core.broker import Sink


@mypyc_attr(allow_interpreted_subclasses=True)
class Reporting:
    """Holds the sink an engine reports to; `running(sink)` starts the engine (its `start`) and
    stops it (its `stop`) when the context ends."""

    _sink: Sink | None = None

    @property
    def sink(self) -> Sink:
        assert self._sink is not None, "run the broker (`running`) for its hub first"
        return self._sink

    def running(self, sink: Sink) -> Running:
        return Running(self, sink)

    async def start(self) -> None:
        """Connect (nothing to do for an engine that keeps everything in the process)."""

    async def stop(self) -> None:
        """Disconnect; called once the hub no longer needs the engine."""


class Running:
    """An engine's `running` context. A plain object, not an async generator, so a process that
    ends without leaving it (a script with no cleanup) has nothing to finalize."""

    __slots__ = ("engine", "sink")

    def __init__(self, engine: Reporting, sink: Sink) -> None:
        self.engine = engine
        self.sink = sink

    async def __aenter__(self) -> None:
        self.engine._sink = self.sink
        await self.engine.start()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.engine.stop()
