"""Keep clients' malformed requests out of the error log.

aiohttp logs every request its HTTP parser rejects (request line or header too long, garbage,
TLS sent to the plain port) at ERROR with a traceback. Those are the client's fault and cost a
scanner nothing to send, so they would fill the log; they are kept only at debug level.
"""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import HttpProcessingError

AIOHTTP_SERVER = "aiohttp.server"


class ClientErrorFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            return logging.getLogger("pushserver").isEnabledFor(logging.DEBUG)
        return True


def install() -> None:
    logger = logging.getLogger(AIOHTTP_SERVER)
    if not any(isinstance(f, ClientErrorFilter) for f in logger.filters):
        logger.addFilter(ClientErrorFilter())
