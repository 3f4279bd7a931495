"""Is the server there at all? Asked once before a run, so a dead server fails in a second.

`GET /stats` with the publish key is what the controller needs throughout the run, so it tests
reachability and the key together; a refusal names the status and the server's own words.
"""

from __future__ import annotations

from pushserver_measure.http11 import Connection, ConnectionClosed, Endpoint

PREFLIGHT_TIMEOUT = 5.0


def server_problem(endpoint: Endpoint, host: str, headers: dict[str, str]) -> str | None:
    """One line saying why the server at `host` cannot be measured, or None when it can."""
    conn = Connection(endpoint, timeout=PREFLIGHT_TIMEOUT)
    try:
        head, body = conn.request("GET", "/stats", headers=headers)
    except (OSError, ConnectionClosed) as exc:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return f"cannot reach the server at {host}: {why}"
    finally:
        conn.close()
    if head.status != 200:
        text = body[:200].decode("utf-8", "replace").strip()
        return f"GET {host}/stats answered {head.status}: {text}"
    return None
