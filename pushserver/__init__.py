"""pushserver: a long-polling / Comet push server."""

__version__ = "0.1.0"
