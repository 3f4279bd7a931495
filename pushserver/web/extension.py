"""Your own routes and middleware on the server's aiohttp application (`--extension`).

aiohttp is the server's extension point: `--extension mypackage.routes:extend` imports
`mypackage.routes` and calls `extend(app)` with the `aiohttp.web.Application` before the server
starts, in every worker. With aiohttp's own API it may add routes (`app.router.add_get`),
middleware (`app.middlewares.append`: they run inside the server's error middleware, which sends
the answer and gives the connection back to the front end), startup and cleanup hooks, and
keys of its own on the app. A route on a path the front end serves itself (`/lp/`, `/stream/`,
`/sse/`, `/ws/`, `/pub`) would never be reached, so the server refuses to start with one.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

from aiohttp import web

from ..config import ConfigError
from .front.publish import BATCH, ONE
from .transports import REGISTRY

NATIVE = (ONE, *(f"/{transport.segment}/" for transport in REGISTRY))
"""The beginnings of the paths the front end serves itself (and `BATCH`): aiohttp never sees
them."""


async def extend(app: web.Application, spec: str) -> None:
    """Call the function `spec` names with `app` (awaited when it is a coroutine function)."""
    function = _function(spec)
    done = function(app)
    if inspect.isawaitable(done):
        await done
    for resource in app.router.resources():
        path = resource.canonical
        if path == BATCH or path.startswith(NATIVE):
            raise ConfigError(
                f"--extension {spec}: route {path} would never be reached: the front end "
                f"serves {BATCH} and the paths beginning with {', '.join(NATIVE)} itself"
            )


def _function(spec: str) -> Callable[..., object]:
    name, _, attribute = spec.partition(":")
    try:
        found: object = importlib.import_module(name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except ImportError as exc:
        raise ConfigError(f"--extension {spec}: cannot import {name}: {exc}") from None
    except AttributeError:
        raise ConfigError(f"--extension {spec}: {name} has no {attribute}") from None
    if not callable(found):
        raise ConfigError(f"--extension {spec}: {attribute} is not a function")
    return found
