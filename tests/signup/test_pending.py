"""One confirmation per mailbox per day: the addresses a bomber varies fold to one mailbox, the
rule's window, and a store claimed from many threads at once lets exactly one through."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable

import pytest

from newsletter.signup.pending import ConfirmationClaims, ConfirmationRule, mailbox_key
from support.claims import MemoryClaims

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)

# Every store the outbox offers joins this list when it exists; the contract is the same.
STORES: list[Callable[[], ConfirmationClaims]] = [MemoryClaims]


@pytest.mark.parametrize(
    ("address", "mailbox"),
    [
        ("Ann.Lee@example.org", "ann.lee@example.org"),
        ("ann.lee+news@example.org", "ann.lee@example.org"),
        ("ann.lee+a+b@EXAMPLE.ORG", "ann.lee@example.org"),
        ("Ann.Lee+x@gmail.com", "annlee@gmail.com"),
        ("a.n.n.l.e.e@googlemail.com", "annlee@gmail.com"),
        ("+tag@example.org", "+tag@example.org"),  # only a tag: an address of its own
        ("ann@bücher.example", "ann@xn--bcher-kva.example"),
    ],
)
def test_the_addresses_of_one_mailbox_fold_to_one_key(address: str, mailbox: str) -> None:
    assert mailbox_key(address) == mailbox


def test_an_invalid_address_has_no_mailbox() -> None:
    with pytest.raises(ValueError, match="@-sign"):
        mailbox_key("not an address")


def test_the_rule_allows_one_per_window() -> None:
    rule = ConfirmationRule()
    assert rule.allows(None, NOW)
    assert not rule.allows(NOW - dt.timedelta(hours=23, minutes=59), NOW)
    assert rule.allows(NOW - DAY, NOW)
    assert not rule.allows(NOW + dt.timedelta(hours=1), NOW)  # a clock set back opens nothing
    assert rule.next_allowed(NOW) == NOW + DAY
    assert ConfirmationRule(dt.timedelta(hours=1)).allows(NOW - dt.timedelta(hours=1), NOW)


@pytest.mark.parametrize("store", STORES)
def test_a_bomber_varying_the_address_gets_one_mail_a_day(
    store: Callable[[], ConfirmationClaims],
) -> None:
    rule, claims = ConfirmationRule(), store()
    variants = [
        "annlee@gmail.com",
        "Ann.Lee+1@gmail.com",
        "a.nnlee+2@googlemail.com",
        "ANNLEE@GMAIL.COM",
    ]
    assert [rule.claim(claims, v, NOW) for v in variants] == [True, False, False, False]
    assert rule.claim(claims, "someone.else@gmail.com", NOW)
    assert not rule.claim(claims, "annlee@gmail.com", NOW + dt.timedelta(hours=23))
    assert rule.claim(claims, "annlee+3@gmail.com", NOW + DAY)


@pytest.mark.parametrize("store", STORES)
def test_concurrent_claims_for_one_mailbox_let_exactly_one_through(
    store: Callable[[], ConfirmationClaims],
) -> None:
    rule, claims = ConfirmationRule(), store()
    results: list[bool] = []
    start = threading.Barrier(32)

    def post(n: int) -> None:
        start.wait()
        results.append(rule.claim(claims, f"victim+{n}@example.org", NOW))

    threads = [threading.Thread(target=post, args=(n,)) for n in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1
