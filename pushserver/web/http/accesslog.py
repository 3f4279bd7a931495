"""Access log lines for requests the front end answers, in aiohttp's default format
(`%a %t "%r" %s %b "%{Referer}i" "%{User-Agent}i"`) on its `aiohttp.access` logger, so one
log reads the same whoever answered."""

from __future__ import annotations

import datetime
import logging

from .request import RequestHead

LOGGER = logging.getLogger("aiohttp.access")


def log_request(remote: str, head: RequestHead, status: int, sent: int) -> None:
    now = datetime.datetime.now(datetime.UTC).astimezone()
    LOGGER.info(
        '%s %s "%s %s HTTP/%s" %d %d "%s" "%s"',
        remote,
        now.strftime("[%d/%b/%Y:%H:%M:%S %z]"),
        head.method,
        head.target,
        head.version,
        status,
        sent,
        head.headers.get("referer", "-"),
        head.headers.get("user-agent", "-"),
    )
