"""Query parameters of subscribe requests: integers of any length, and JSONP's script text."""

from __future__ import annotations

import pytest

from pushserver.core.errors import InvalidInput
from pushserver.web.transports.coding import script_safe
from pushserver.web.transports.common import digits_value, int_param


@pytest.mark.parametrize(
    ("digits", "value"),
    [("0", 0), ("000", 0), ("0042", 42), ("100", 100), ("101", 101), ("1000", 101)],
)
def test_digits_value_is_exact_up_to_high_and_just_above_beyond(digits, value):
    assert digits_value(digits, 100) == value


def test_digits_value_takes_more_digits_than_int_does():
    assert digits_value("9" * 5000, 100) == 101
    assert digits_value("0" * 5000 + "7", 100) == 7


def test_int_param_clamps_only_when_asked():
    query = {"limit": "9" * 5000}
    assert int_param(query, "limit", 5, 1, 100, clamp=True) == 100
    with pytest.raises(InvalidInput):
        int_param(query, "limit", 5, 1, 100)
    with pytest.raises(InvalidInput):
        int_param({"limit": "0"}, "limit", 5, 1, 100, clamp=True)
    assert int_param({}, "limit", 5, 1, 100, clamp=True) == 5


def test_script_safe_escapes_the_javascript_line_separators():
    body = '{"data":"a\u2028b\u2029c"}'.encode()
    assert script_safe(body) == b'{"data":"a\\u2028b\\u2029c"}'
    assert script_safe(b'{"data":"plain"}') == b'{"data":"plain"}'
