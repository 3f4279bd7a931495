"""The contract's traits (`transports/exchange.py`): `Exchange`, `Kept` and `Settling` are classes
the connection and the polls derive from, so mypy no longer checks their methods structurally. A
method of the contract left to its stub would raise `NotImplementedError` only when first called;
here each is checked to be the implementer's own."""

from __future__ import annotations

import inspect

import pytest

from pushserver.web.front.connection import Connection
from pushserver.web.transports.exchange import Exchange, Kept, Settling
from pushserver.web.transports.longpoll import GzipPlainPoll, HeadedPoll, PlainPoll


def contract(trait: type) -> list[str]:
    return [
        name
        for name, member in vars(trait).items()
        if inspect.isroutine(member) and not name.startswith("__")
    ]


def test_the_contract_names_what_a_handler_and_the_front_end_call() -> None:
    assert {"reply", "send", "finish", "hold", "settle", "keep", "take_kept"} <= set(
        contract(Exchange)
    )
    assert contract(Kept) == ["let_go", "awaits"]
    assert contract(Settling) == ["done"]


@pytest.mark.parametrize(
    ("implementer", "trait"),
    [
        (Connection, Exchange),
        (PlainPoll, Kept),
        (GzipPlainPoll, Kept),
        *[(poll, Settling) for poll in (PlainPoll, GzipPlainPoll, HeadedPoll)],
    ],
)
def test_every_method_of_the_contract_is_the_implementers_own(
    implementer: type, trait: type
) -> None:
    assert issubclass(implementer, trait)
    stubs = [name for name in contract(trait) if getattr(implementer, name) is getattr(trait, name)]
    assert stubs == []
