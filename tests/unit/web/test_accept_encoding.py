"""`Accept-Encoding` read the way RFC 9110 section 12.5.3 says: which of gzip and the answer
as it is (identity) a request accepts."""

from __future__ import annotations

import pytest

from pushserver.web.http.coding import Accepts, accepts


@pytest.mark.parametrize(
    ("value", "gzip", "identity"),
    [
        (None, False, True),
        ("", False, True),
        ("gzip", True, True),
        ("gzip, deflate, br", True, True),
        ("GZIP", True, True),
        ("x-gzip", True, True),
        ("br, deflate", False, True),
        ("identity", False, True),
        ("gzip;q=0", False, True),
        ("gzip; q=0.000", False, True),
        ("gzip;q=0.001", True, True),
        ("gzip;Q=0.5", True, True),
        ("gzip;q=1.0", True, True),
        ("*", True, True),
        ("*;q=0", False, False),
        ("*;q=0, identity", False, True),
        ("gzip;q=0, *", False, True),
        ("br, *;q=0.1", True, True),
        ("identity;q=0", False, False),
        ("gzip, identity;q=0", True, False),
        ("gzip;q=bogus", False, True),
        ("gzip;q=1.5", False, True),
        ("gzip;q=0.1234", False, True),
        (" , gzip ;q=0.5 , ", True, True),
    ],
)
def test_accept_encoding(value, gzip, identity):
    assert accepts(value) == Accepts(gzip, identity)
