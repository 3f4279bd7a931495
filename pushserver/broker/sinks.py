"""What every engine does with the hub it reports to."""

from __future__ import annotations

from ..core.broker import Sink


class Reporting:
    """Holds the sink an engine reports to; the hub binds itself before starting the engine."""

    _sink: Sink | None = None

    def bind(self, sink: Sink) -> None:
        self._sink = sink

    @property
    def sink(self) -> Sink:
        assert self._sink is not None, "bind() the broker to its hub first"
        return self._sink
