"""Sans-I/O wire framing: bytes in, bytes and decisions out (no aiohttp, no asyncio)."""
