"""Subscribe tokens: which channels a claim covers, and every way a token is refused."""

from __future__ import annotations

import jwt
import pytest

from pushserver.core.errors import Forbidden, Unauthorized
from pushserver.core.tokens import allows, mint, verify

SECRET = "s" * 64
NOW = 1_800_000_000


@pytest.mark.parametrize(
    ("patterns", "channel", "allowed"),
    [
        (["news"], "news", True),
        (["news"], "news2", False),
        (["news*"], "news", True),
        (["news*"], "news.eu", True),
        (["news.*"], "news", False),
        (["*"], "anything", True),
        (["a", "b*"], "bx", True),
        ([], "news", False),
    ],
)
def test_allows_exact_names_and_prefixes(patterns, channel, allowed):
    assert allows(patterns, channel) is allowed


def test_mint_writes_channels_expiry_and_issue_time():
    token = mint(["a", "b*"], 90.7, SECRET, now=NOW + 0.9)
    claims = jwt.decode(
        token, SECRET, algorithms=["HS256"], options={"verify_exp": False, "verify_iat": False}
    )
    assert claims == {"channels": ["a", "b*"], "exp": NOW + 92, "iat": NOW}


def test_a_short_token_minted_late_in_a_second_still_lasts_its_whole_ttl():
    token = mint(["a"], 1, SECRET, now=NOW + 0.9)
    claims = jwt.decode(
        token, SECRET, algorithms=["HS256"], options={"verify_exp": False, "verify_iat": False}
    )
    assert claims["exp"] - (NOW + 0.9) >= 1


def test_verify_returns_the_expiry_of_a_covering_token():
    token = mint(["user.42.*", "news"], 60, SECRET)
    expires = verify(token, SECRET, ["news", "user.42.inbox"])
    assert (
        isinstance(expires, float)
        and expires == jwt.decode(token, SECRET, algorithms=["HS256"])["exp"]
    )


def test_a_token_that_does_not_cover_a_channel_is_forbidden():
    with pytest.raises(Forbidden) as caught:
        verify(mint(["news"], 60, SECRET), SECRET, ["news", "sports"])
    assert caught.value.code == "forbidden" and "'sports'" in caught.value.message


def _claims(**claims: object) -> str:
    return jwt.encode(claims, SECRET, algorithm="HS256")


@pytest.mark.parametrize(
    ("token", "says"),
    [
        (None, "needs a subscribe token"),
        ("", "needs a subscribe token"),
        ("not.a.jwt", "invalid subscribe token"),
        (mint(["news"], 60, "another-secret-" + "x" * 30), "invalid subscribe token"),
        (mint(["news"], -10, SECRET), "expired"),
        (_claims(channels=["news"]), "invalid subscribe token"),  # no exp
        (_claims(exp=NOW * 2), "invalid subscribe token"),  # no channels
        (_claims(channels="news", exp=NOW * 2), "claims channels (list)"),
        (_claims(channels=["news", 7], exp=NOW * 2), "claims channels (list)"),
        (jwt.encode({"channels": ["news"], "exp": NOW * 2}, SECRET, "HS512"), "invalid"),
        (jwt.encode({"channels": ["news"], "exp": NOW * 2}, None, "none"), "invalid"),
    ],
)
def test_missing_malformed_or_foreign_tokens_are_unauthorized(token, says):
    with pytest.raises(Unauthorized) as caught:
        verify(token, SECRET, ["news"])
    assert caught.value.code == "unauthorized" and says in caught.value.message
