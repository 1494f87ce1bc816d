"""Click tokens: what they name, that nothing else verifies as one, rotation, and their size."""

from __future__ import annotations

import base64
import os
import string

import pytest

from newsletter.errors import TokenError
from newsletter.mail.clicktokens import LinkTokens, click_token, url_digest, verify_click
from newsletter.mail.tokens import SigningKey, key_id, sign, verify
from newsletter.rendering.places import CANARY, Place, Region

SECRET = "s3cret-for-tests-only-0123456789"
OLD = "an-older-secret-still-in-links-0001"
URL = "https://github.com/Oneflow-Inc/oneflow"
PLACE = Place(Region.LINKS, 3, 11, 1)
ALPHABET = string.ascii_letters + string.digits + "-_"
ALPHABET_ORDER = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def unb64(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def test_an_aggregate_token_names_issue_place_and_list() -> None:
    token = click_token(SECRET, 14, PLACE, URL, list_name="main")
    target = verify_click(SECRET, token)
    assert (target.issue, target.place, target.list_name, target.row) == (14, PLACE, "main", None)
    assert target.names(URL)
    assert not target.names(URL + "/")


def test_a_per_reader_token_names_the_row_and_no_list() -> None:
    token = click_token(SECRET, 14, PLACE, URL, row=1_234_567)
    target = verify_click(SECRET, token)
    assert (target.issue, target.place, target.list_name, target.row) == (
        14,
        PLACE,
        None,
        1_234_567,
    )


def test_aggregate_tokens_are_the_same_for_every_reader_per_reader_ones_differ() -> None:
    same = {click_token(SECRET, 14, PLACE, URL, list_name="main") for _ in range(3)}
    assert len(same) == 1
    rows = {click_token(SECRET, 14, PLACE, URL, row=row) for row in range(50)}
    assert len(rows) == 50
    places = {click_token(SECRET, 14, Place(Region.LINKS, 3, 11, n), URL, row=1) for n in range(5)}
    assert len(places) == 5
    assert click_token(SECRET, 14, PLACE, URL, list_name="staging") not in same


def test_a_token_names_a_list_or_a_row_never_both_or_neither() -> None:
    with pytest.raises(ValueError, match="either"):
        click_token(SECRET, 14, PLACE, URL)
    with pytest.raises(ValueError, match="either"):
        click_token(SECRET, 14, PLACE, URL, list_name="main", row=3)
    with pytest.raises(ValueError, match="range"):
        click_token(SECRET, 14, Place(Region.LINKS, -1), URL, row=3)


def test_tokens_are_short_url_safe_and_opaque() -> None:
    biggest = click_token(SECRET, 9_999, Place(Region.LINKS, 60, 200, 20), URL, row=10**8)
    aggregate = click_token(SECRET, 14, PLACE, URL, list_name="main")
    assert len(aggregate) <= 44
    assert len(biggest) == 24
    for token in (biggest, aggregate):
        assert set(token) <= set(ALPHABET)
        raw = unb64(token)
        assert b"main" not in raw
        assert (10**8).to_bytes(4, "big") not in raw
        assert url_digest(URL) not in raw


@pytest.mark.parametrize("mode", ["list", "row"])
def test_every_altered_character_fails(mode: str) -> None:
    args = {"list_name": "main"} if mode == "list" else {"row": 42}
    token = click_token(SECRET, 14, PLACE, URL, **args)  # type: ignore[arg-type]
    for position in range(len(token)):
        for char in "AB_":
            if token[position] == char:
                continue
            altered = token[:position] + char + token[position + 1 :]
            with pytest.raises(TokenError):
                verify_click(SECRET, altered)


def twin(token: str) -> str:
    """The same bytes spelled otherwise: the last character's lowest bit, which no byte holds
    when the length is not a multiple of 4, flipped."""
    value = ALPHABET_ORDER.index(token[-1])
    return token[:-1] + ALPHABET_ORDER[value ^ 1]


def test_the_last_characters_unused_bits_are_not_a_second_spelling() -> None:
    token = next(
        t
        for n in range(40)
        if len(t := click_token(SECRET, 14, PLACE, URL, list_name=f"list{n}")) % 4 > 1
    )
    assert twin(token) != token
    assert unb64(twin(token)) == unb64(token)
    with pytest.raises(TokenError, match="malformed"):
        verify_click(SECRET, twin(token))


def test_an_unsubscribe_token_is_no_click_token_and_back() -> None:
    unsubscribe = sign(SECRET, "main", "li.lei@example.com")
    click = click_token(SECRET, 14, PLACE, URL, list_name="main")
    with pytest.raises(TokenError):
        verify_click(SECRET, unsubscribe)
    with pytest.raises(TokenError):
        verify_click(SECRET, unsubscribe.replace(".", ""))
    with pytest.raises(TokenError):
        verify(SECRET, click)
    # Spliced into the other's shape (key id, then the box), each still fails its tag: the two
    # kinds are boxed under different keys and associated data.
    box = unsubscribe.split(".")[1]
    kid = b64(unb64(key_id(SECRET))[:3])
    with pytest.raises(TokenError, match="forged"):
        verify_click(SECRET, b64(unb64(kid) + unb64(box)))
    with pytest.raises(TokenError, match="forged"):
        verify(SECRET, f"{key_id(SECRET)}.{b64(unb64(click)[3:])}")


def test_an_old_token_works_after_rotation_and_an_unknown_key_is_named() -> None:
    token = click_token(OLD, 14, PLACE, URL, row=7)
    rotated = SigningKey(SECRET.encode(), ephemeral=False, previous=(OLD.encode(),))
    assert verify_click(rotated.verifying, token).row == 7
    assert verify_click([SECRET, OLD], token).row == 7
    with pytest.raises(TokenError, match="another key"):
        verify_click(SECRET, token)


@pytest.mark.parametrize(
    "token",
    [
        "",
        "abc",
        "=" * 40,
        "a" * 300,
        "Zm9v" * 8 + "é",
        "irGAkSHBzpxA6u72a8F2sK3GM7mt9r7Zle8HMF_gGk0=",
    ],
)
def test_malformed_tokens_fail_with_a_reason(token: str) -> None:
    with pytest.raises(TokenError) as caught:
        verify_click(SECRET, token)
    assert "token" in caught.value.message
    assert "link" in caught.value.hint


def test_the_canary_has_its_own_place_in_the_token_space() -> None:
    token = click_token(SECRET, 14, CANARY, "", list_name="main")
    assert verify_click(SECRET, token).place.region is Region.CANARY
    assert token != click_token(SECRET, 14, Place(Region.INTRO), "", list_name="main")


def test_an_unsubscribe_token_with_its_unused_bits_set_no_longer_verifies() -> None:
    # Regression: verify() took any spelling that base64 decodes to the same bytes.
    address, token = next(
        (a, t)
        for n in range(60)
        if len((t := sign(SECRET, "main", a := f"reader{n}@example.com")).split(".")[1]) % 4 > 1
    )
    assert unb64(twin(token).split(".")[1]) == unb64(token.split(".")[1])
    assert verify(SECRET, token) == ("main", address)
    with pytest.raises(TokenError, match="malformed"):
        verify(SECRET, twin(token))


def test_an_issues_tokens_at_once_are_the_tokens_one_by_one() -> None:
    links = [(PLACE, URL), (Place(Region.TITLE, 0, 0), "https://b.example/"), (CANARY, "")]
    tokens = LinkTokens(SECRET, 14, links)
    assert tokens.for_row(9) == [click_token(SECRET, 14, p, u, row=9) for p, u in links]
    assert tokens.for_list("main") == [
        click_token(SECRET, 14, p, u, list_name="main") for p, u in links
    ]
    with pytest.raises(ValueError, match="empty"):
        tokens.for_list("")


@pytest.mark.parametrize(
    ("issue", "place", "row"),
    [
        (14, Place(Region.LINKS, 300, 0, 0), 5),  # a section past 255
        (14, Place(Region.TEXT, 0, 0, 256), 5),  # a link past 255
        (70_000, PLACE, 5),  # an issue past 65,535
        (14, PLACE, 2**28),  # a row past four varint bytes
        (14, PLACE, 2**62),
    ],
)
def test_what_a_block_cannot_hold_goes_in_a_box(issue: int, place: Place, row: int) -> None:
    token = click_token(SECRET, issue, place, URL, row=row)
    assert len(token) > 24
    target = verify_click(SECRET, token)
    assert (target.issue, target.place, target.row) == (issue, place, row)
    assert target.names(URL) is True


def test_a_block_of_noise_is_no_token() -> None:
    """Blocks that decipher to anything but the zeros a row token ends in are refused: 2,000
    random ones under the right key id, none taken."""
    kid = unb64(key_id(SECRET))[:2]
    for _ in range(2_000):
        with pytest.raises(TokenError, match="forged"):
            verify_click(SECRET, b64(kid + os.urandom(16)))


def test_an_empty_issue_has_no_tokens() -> None:
    assert LinkTokens(SECRET, 14, []).for_row(3) == []
