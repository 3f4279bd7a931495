"""Unit tests of `pushserver/web/`: the HTTP/1.1 connection without sockets, heads, answers,
the re-poll fast path, the timer wheel, admission."""
