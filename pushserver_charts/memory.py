"""The server's memory growth per subscriber and per channel, against the run's own baseline."""

from __future__ import annotations

import numpy as np

from pushserver_charts.layout import series
from pushserver_charts.results import Run


def per_subscriber_kib(run: Run) -> np.ndarray:
    """The server's memory growth per subscriber it holds, against the run's own baseline
    (RSS and connections before the first subscriber)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        grown = series(run, lambda s: s.server_rss) - run.idle_rss
        held = series(run, lambda s: s.held) - run.idle_figure("connections")
        return np.where(held > 0, grown / 1024 / held, np.nan)


def per_channel_kib(run: Run) -> np.ndarray:
    """The same per channel the server process holds (channels test: one per subscriber,
    each with its own history)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        grown = series(run, lambda s: s.server_rss) - run.idle_rss
        channels = series(run, lambda s: s.server_channels) - run.idle_figure("channels")
        return np.where(channels > 0, grown / 1024 / channels, np.nan)
