"""The signup fields: one parser for the HTML form and the JSON endpoint; the honeypot, unknown,
repeated, oversized and non-text fields, and addresses refused as the lists refuse them."""

from __future__ import annotations

from typing import Any

import pytest

from newsletter.signup.form import FormRefusal, FormVerdict, Signup, read_signup

LISTS = {"main"}
GOOD = [("email", "Ann@Example.org"), ("altcha", "cGF5bG9hZA=="), ("homepage", "")]


def verdict(fields: list[tuple[str, Any]], lists: set[str] = LISTS) -> FormVerdict:
    result = read_signup(fields, lists)
    return FormVerdict.OK if isinstance(result, Signup) else result.verdict


def test_a_good_signup() -> None:
    result = read_signup(GOOD, LISTS)
    assert result == Signup("Ann@example.org", "main", "cGF5bG9hZA==")


def test_the_json_endpoints_object_reads_the_same() -> None:
    posted = {"email": "ann@example.org", "list": "main", "altcha": "x"}
    assert isinstance(read_signup(posted.items(), LISTS), Signup)


def test_a_filled_honeypot_is_told_apart_so_it_can_be_answered_as_accepted() -> None:
    assert verdict([*GOOD[:2], ("homepage", "http://spam.example")]) is FormVerdict.HONEYPOT
    assert verdict([*GOOD[:2], ("homepage", "   ")]) is FormVerdict.OK


@pytest.mark.parametrize(
    "fields",
    [
        [*GOOD, ("name", "Buy pills at ...")],  # a field the form does not have
        [*GOOD, ("email", "other@example.org")],  # repeated
        [("email", ["a@example.org"]), ("altcha", "x")],  # not text (JSON)
        [("email", None), ("altcha", "x")],
        [("email", "a@example.org"), ("altcha", "x" * 3000)],
        [("email", "a" * 250 + "@example.org"), ("altcha", "x")],
        [("email", "a@example.org")],  # no proof of work
        [("email", "a@example.org"), ("altcha", "")],
        [("list", "main")] * 20,
    ],
)
def test_anything_but_our_form_is_malformed(fields: list[tuple[str, Any]]) -> None:
    assert verdict(fields) is FormVerdict.MALFORMED


@pytest.mark.parametrize(
    "address",
    ["", "not an address", "ann@example.org\r\nBcc: victim@example.org", "=?utf-8?q?x?=@a.org"],
)
def test_a_bad_address_is_refused_as_a_list_row_would_be(address: str) -> None:
    result = read_signup([("email", address), ("altcha", "x")], LISTS)
    assert isinstance(result, FormRefusal)
    assert result.verdict is FormVerdict.BAD_ADDRESS


def test_the_list_is_optional_only_when_one_list_takes_signups() -> None:
    assert verdict([*GOOD, ("list", "main")]) is FormVerdict.OK
    assert verdict([*GOOD, ("list", "staging")]) is FormVerdict.UNKNOWN_LIST
    assert verdict(GOOD, {"main", "weekly"}) is FormVerdict.UNKNOWN_LIST
    assert verdict([*GOOD, ("list", "weekly")], {"main", "weekly"}) is FormVerdict.OK
