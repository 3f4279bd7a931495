"""Everything that speaks HTTP through aiohttp: routes, handlers, transports, the server."""
