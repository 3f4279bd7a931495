"""`Repeats`: a head seen before, but for its cursor, is recognised by its bytes."""

from __future__ import annotations

from pushserver.web.front.repoll import MAX_REPEAT_BYTES, MAX_REPEATS, Repeats
from pushserver.web.http.parser import HeadParser
from pushserver.web.http.request import RequestHead

MAX_LINE = 8190


class Parsed:
    def __init__(self, head: RequestHead) -> None:
        self.head = head

    def again(self, conn: object, value: str) -> None:
        return None


def head(target: str, extra: str = "") -> tuple[bytes, RequestHead]:
    raw = f"GET {target} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode()
    return raw, HeadParser(MAX_LINE, 8190, 100).parse(raw)


def found(target: str) -> object:
    raw, parsed = head(target)
    return Repeats(MAX_LINE).find(raw, parsed, "cursor", Parsed(parsed))


def test_the_same_head_with_another_cursor_gives_that_cursor():
    raw, parsed = head("/lp/news?timeout=30&cursor=news:e1:4&limit=5")
    repeat = Repeats(MAX_LINE).find(raw, parsed, "cursor", Parsed(parsed))
    assert repeat is not None
    assert repeat.value(raw) == "news:e1:4"
    assert repeat.value(head("/lp/news?timeout=30&cursor=news:e1:12345&limit=5")[0]) == (
        "news:e1:12345"
    )
    assert repeat.value(head("/lp/news?timeout=30&cursor=&limit=5")[0]) == ""


def test_any_other_difference_is_not_a_repeat():
    raw, parsed = head("/lp/news?cursor=news:e1:4")
    repeat = Repeats(MAX_LINE).find(raw, parsed, "cursor", Parsed(parsed))
    assert repeat is not None
    for other in [
        head("/lp/news?cursor=news:e1:5&x=1")[0],
        head("/lp/news?cursor=news:e1:5", "Origin: o\r\n")[0],
        head("/lp/other?cursor=news:e1:5")[0],
        head("/lp/news?cursor=a+b")[0],
        head("/lp/news?cursor=a&cursor=b")[0],
        head("/lp/news?cursor=news:e1:5")[0][:-2],
    ]:
        assert repeat.value(other) is None


def test_heads_whose_cursor_bytes_are_not_its_value_are_not_remembered():
    assert found("/lp/news?timeout=5") is None  # no cursor
    assert found("/lp/news?cursor=news%3Ae1:4") is None  # `:` sent both ways
    assert found("/lp/news?cursor=news%3Ae1%3a4") is None  # `:` escaped two ways
    assert found("/lp/news?cursor=caf%C3%A9") is None  # not one ASCII character per escape
    assert found("/lp/news%31?cursor=news:e1:4") is None  # an escape elsewhere
    assert found("/lp/news?t=%31&cursor=news:e1:4") is None
    assert found("/lp/news?cursor=news:e1:4%") is None  # not an escape: the parser keeps it
    assert found("/lp/news?cursor=a+b") is None
    assert found("/lp/news?xcursor=1") is None
    assert found("/lp/news?xcursor=1&cursor=news:e1:4") is not None


def test_the_first_cursor_parameter_is_the_one_that_varies():
    raw, parsed = head("/lp/news?cursor=news:e1:4&cursor=zzz")
    repeat = Repeats(MAX_LINE).find(raw, parsed, "cursor", Parsed(parsed))
    assert repeat is not None
    assert repeat.value(head("/lp/news?cursor=news:e1:9&cursor=zzz")[0]) == "news:e1:9"


def test_connections_sending_the_same_bytes_share_one_repeat_and_the_table_is_bounded():
    repeats = Repeats(MAX_LINE)
    raw, parsed = head("/lp/news?cursor=news:e1:4")
    first = repeats.find(raw, parsed, "cursor", Parsed(parsed))
    raw2, parsed2 = head("/lp/news?cursor=news:e1:7")
    assert repeats.find(raw2, parsed2, "cursor", Parsed(parsed2)) is first
    for n in range(MAX_REPEATS + 10):
        raw, parsed = head(f"/lp/c{n}?cursor=c{n}:e:1")
        repeats.find(raw, parsed, "cursor", Parsed(parsed))
    assert len(repeats.table) <= MAX_REPEATS


def test_holds_is_true_only_for_the_same_head_with_exactly_that_value():
    raw, parsed = head("/lp/news?timeout=30&cursor=news:e1:4&limit=5")
    repeat = Repeats(MAX_LINE).find(raw, parsed, "cursor", Parsed(parsed))
    assert repeat is not None
    at = head("/lp/news?timeout=30&cursor=news:e1:12&limit=5")[0]
    assert repeat.holds(at, "news:e1:12")
    assert repeat.value(at) == "news:e1:12"  # what the parse would have made of it
    assert not repeat.holds(at, "news:e1:1")
    assert not repeat.holds(at, "news:e1:123")
    assert not repeat.holds(at + b"GET / HTTP/1.1\r\n\r\n", "news:e1:12")  # more after it
    assert not repeat.holds(head("/lp/news?timeout=31&cursor=news:e1:12&limit=5")[0], "news:e1:12")
    assert not repeat.holds(head("/lp/news?timeout=30&cursor=news:e1:12")[0], "news:e1:12")


def test_a_cursor_inside_another_parameters_value_is_not_the_cursor():
    # `a` is "x?cursor=C0": the query starts at the target's first `?`, as the parser has it.
    raw, parsed = head("/lp/rq?a=x?cursor=C3&cursor=C3&timeout=0")
    assert parsed.query["cursor"] == "C3"
    repeat = Repeats(MAX_LINE).find(raw, parsed, "cursor", Parsed(parsed))
    assert repeat is not None
    assert repeat.value(head("/lp/rq?a=x?cursor=C0&cursor=C3&timeout=0")[0]) is None
    assert repeat.value(head("/lp/rq?a=x?cursor=C3&cursor=C9&timeout=0")[0]) == "C9"
    assert found("/lp/rq?a=b?cursor=1&timeout=0") is None  # no cursor parameter at all
    assert found("/lp/rq?cursor&cursor=1") is None  # the first one has no value


def test_a_value_past_the_line_limit_is_not_a_repeat():
    raw, parsed = head("/lp/news?cursor=news:e1:4")
    repeat = Repeats(len("/lp/news?cursor=") + 20).find(raw, parsed, "cursor", Parsed(parsed))
    assert repeat is not None
    assert repeat.value(head("/lp/news?cursor=" + "k" * 20)[0]) == "k" * 20
    assert repeat.value(head("/lp/news?cursor=" + "k" * 21)[0]) is None
    assert not repeat.holds(head("/lp/news?cursor=" + "k" * 21)[0], "k" * 21)


def test_a_long_head_is_not_remembered():
    padding = "X-Pad: " + "p" * MAX_REPEAT_BYTES + "\r\n"
    raw, parsed = head("/lp/news?cursor=news:e1:4", padding)
    assert Repeats(MAX_LINE).find(raw, parsed, "cursor", Parsed(parsed)) is None


def test_a_head_remembered_as_it_is_repeats_only_itself():
    raw, parsed = head("/pub/news", "Transfer-Encoding: chunked\r\nAuthorization: Bearer k\r\n")
    same = Repeats(MAX_LINE).find(raw, parsed, None, Parsed(parsed))
    assert same is not None and same.value(raw) == ""
    other, _ = head("/pub/news", "Transfer-Encoding: chunked\r\nAuthorization: Bearer j\r\n")
    assert same.value(other) is None and same.value(raw[:-2]) is None


def test_a_head_with_a_length_repeats_with_any_length():
    """A publisher's head, remembered varying in its `Content-Length` value (any case and
    spacing of the field, as sent); anything else different, or a value not plain digits
    within an int64, is not that repeat."""
    for field in ("Content-Length: ", "content-length:", "CONTENT-LENGTH:  "):
        raw, parsed = head("/pub/news", f"{field}5\r\nAuthorization: Bearer k\r\n")
        sized = Repeats(MAX_LINE).find(raw, parsed, None, Parsed(parsed))
        assert sized is not None and sized.value(raw) == "5"
        for length in ("6", "12345", "0", "0012", "9" * 18):
            other = head("/pub/news", f"{field}{length}\r\nAuthorization: Bearer k\r\n")[0]
            assert sized.value(other) == length
        for length in ("", "1 2", "+5", "-5", "0x5", "9" * 19):
            other = raw.replace(b"5\r\nAuth", f"{length}\r\nAuth".encode())
            assert sized.value(other) is None
        other = head("/pub/news", f"{field}6\r\nAuthorization: Bearer j\r\n")[0]
        assert sized.value(other) is None
    raw, parsed = head("/pub/news", "Content-Length: 5\r\n")
    repeats = Repeats(MAX_LINE)
    first = repeats.find(raw, parsed, None, Parsed(parsed))
    again = head("/pub/news", "Content-Length: 77\r\n")
    assert repeats.find(again[0], again[1], None, Parsed(again[1])) is first


def test_holds_builds_the_head_to_compare_once_per_value():
    raw, parsed = head("/lp/news?cursor=news:e1:4")
    repeat = Repeats(MAX_LINE).find(raw, parsed, "cursor", Parsed(parsed))
    assert repeat is not None
    awaited = "news:e1:5"
    assert repeat.holds(head(f"/lp/news?cursor={awaited}")[0], awaited)
    built = repeat.expected
    assert repeat.holds(head(f"/lp/news?cursor={awaited}")[0], awaited)
    assert repeat.expected is built  # the same value: compared with the bytes built before
    assert not repeat.holds(raw, awaited)
    assert repeat.holds(raw, "news:e1:4") and repeat.expected is not built


def test_a_percent_encoded_cursor_is_a_repeat_escaped_as_its_client_escapes_it():
    """`encodeURIComponent` (upper case) and a client writing lower-case escapes."""
    for colon in ("%3A", "%3a"):
        raw, parsed = head(f"/lp/news?timeout=30&cursor=news{colon}e1{colon}4&limit=5")
        repeat = Repeats(MAX_LINE).find(raw, parsed, "cursor", Parsed(parsed))
        assert repeat is not None
        assert repeat.value(raw) == parsed.query["cursor"] == "news:e1:4"
        at = head(f"/lp/news?timeout=30&cursor=news{colon}e1{colon}12&limit=5")[0]
        assert repeat.holds(at, "news:e1:12")
        assert repeat.value(at) == "news:e1:12"
        plain = head("/lp/news?timeout=30&cursor=news:e1:12&limit=5")[0]
        assert not repeat.holds(plain, "news:e1:12")
        assert not repeat.holds(at, "news:e1:1")
    raw, parsed = head("/lp/news?cursor=news%3Ae1%3A4")
    repeat = Repeats(MAX_LINE).find(raw, parsed, "cursor", Parsed(parsed))
    assert repeat is not None
    for sent, decoded in [
        ("news:e1:5", "news:e1:5"),  # any value the parser decodes is read as it decodes it
        ("news%3ae1%3A5", "news:e1:5"),
        ("news%40x%2Cy", "news@x,y"),
        ("caf%C3%A9", "café"),
    ]:
        other = head(f"/lp/news?cursor={sent}")
        assert repeat.value(other[0]) == other[1].query["cursor"] == decoded
    for sent in ["news%3", "news%zz", "a+b", "a%20b+c"]:
        assert repeat.value(head(f"/lp/news?cursor={sent}")[0]) is None


def test_plain_and_encoded_heads_of_one_channel_are_two_repeats():
    repeats = Repeats(MAX_LINE)
    raw, parsed = head("/lp/news?cursor=news:e1:4")
    plain = repeats.find(raw, parsed, "cursor", Parsed(parsed))
    raw, parsed = head("/lp/news?cursor=news%3Ae1%3A4")
    encoded = repeats.find(raw, parsed, "cursor", Parsed(parsed))
    assert plain is not None and encoded is not None and plain is not encoded
    assert plain.holds(head("/lp/news?cursor=news:e1:6")[0], "news:e1:6")
    assert encoded.holds(head("/lp/news?cursor=news%3Ae1%3A6")[0], "news:e1:6")
    assert repeats.find(raw, parsed, "cursor", Parsed(parsed)) is encoded


def test_a_head_learned_from_an_empty_cursor_is_respelled_by_the_first_escaped_one():
    repeats = Repeats(MAX_LINE)
    raw, parsed = head("/lp/news?timeout=30&cursor=")
    plain = repeats.find(raw, parsed, "cursor", Parsed(parsed))
    assert plain is not None and plain.escapes == {}
    assert (
        repeats.respelled(plain, head("/lp/news?timeout=30&cursor=news:e1:4")[0], "news:e1:4")
        is plain
    )
    sent = head("/lp/news?timeout=30&cursor=news%3Ae1%3A4")[0]
    value = plain.value(sent)
    assert value == "news:e1:4"
    encoded = repeats.respelled(plain, sent, value)
    assert encoded is not plain and encoded.parsed is plain.parsed
    assert encoded.holds(head("/lp/news?timeout=30&cursor=news%3Ae1%3A5")[0], "news:e1:5")
    assert repeats.respelled(plain, sent, value) is encoded  # shared, as `find` shares them
    assert repeats.respelled(encoded, sent, value) is encoded
    mixed = head("/lp/news?timeout=30&cursor=news%3Ae1:4")[0]
    assert repeats.respelled(plain, mixed, "news:e1:4") is plain  # no one way to escape it
