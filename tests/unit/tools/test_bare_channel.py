"""The bare server's channel: which answer a poll gets, and the window of kept answers."""

from __future__ import annotations

from pushserver_bench.bare import KEPT, Channel, answer


def test_a_poll_gets_the_message_after_the_one_it_has_or_waits() -> None:
    ch = Channel()
    assert ch.after(ch.last) is None  # nothing published: a poll waits
    assert not ch.publish(b"1")  # nobody held
    assert not ch.publish(b"2")
    assert ch.after(0) == answer(1, b"1")
    assert ch.after(1) == answer(2, b"2")
    assert ch.after(2) is None and ch.last == 2


def test_a_poll_behind_the_kept_window_gets_the_oldest_kept() -> None:
    ch = Channel()
    for n in range(1, KEPT + 6):
        ch.publish(b"%d" % n)
    assert (ch.first, ch.last) == (6, KEPT + 5)
    assert ch.after(0) == answer(6, b"6")
    assert ch.after(KEPT + 4) == answer(KEPT + 5, b"%d" % (KEPT + 5))


def test_an_answer_carries_the_validators_the_next_poll_sends_back() -> None:
    head, _, body = answer(7, b'{"a":1}').partition(b"\r\n\r\n")
    assert body == b'{"a":1}'
    assert b"\r\nEtag: 7\r\n" in head and b"\r\nContent-Length: 7" in head
