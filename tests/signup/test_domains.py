"""The domain check against a real DNS server on 127.0.0.1 (dnslib, tests/support/dnszone.py):
MX, implicit MX (A/AAAA), null MX, NXDOMAIN, no records, a failing or silent resolver; the
disposable and blocked lists before any lookup; one lookup per domain however many ask."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from newsletter.config.settings import SignupSettings
from newsletter.signup.domains import DomainCheck, DomainStatus, listed
from support.dnszone import Zone, ZoneResolver, closed_port, dns_server

ZONE: Zone = {
    ("mx.example.org", "MX"): ["10 mail.mx.example.org"],
    ("a-only.example.org", "A"): ["192.0.2.25"],
    ("aaaa-only.example.org", "AAAA"): ["2001:db8::25"],
    ("nullmx.example.org", "MX"): ["0 ."],
    ("txt-only.example.org", "TXT"): ["v=spf1 -all"],
    ("xn--bcher-kva.example", "MX"): ["10 mail.xn--bcher-kva.example"],
}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, ZoneResolver]]:
    """One server for the module (each start and stop costs half a second)."""
    with dns_server(ZONE, {"servfail.example.org": "SERVFAIL"}) as running:
        yield running


@pytest.fixture
def port(server: tuple[int, ZoneResolver]) -> int:
    server[1].queries.clear()
    return server[0]


@pytest.fixture
def queries(server: tuple[int, ZoneResolver]) -> list[tuple[str, str]]:
    return server[1].queries


def settings(port: int, **overrides: object) -> SignupSettings:
    values: dict[str, object] = {"nameservers": [f"127.0.0.1:{port}"], "dns_timeout": 1.0}
    return SignupSettings.model_validate({**values, **overrides})


async def check(port: int, address: str, **overrides: object) -> tuple[DomainStatus, str]:
    verdict = await DomainCheck(settings(port, **overrides)).check(address)
    return verdict.status, verdict.reason


@pytest.mark.parametrize(
    ("address", "status", "reason"),
    [
        ("ann@mx.example.org", DomainStatus.OK, ""),
        ("ann@a-only.example.org", DomainStatus.OK, ""),  # RFC 5321 5.1: the A record is the MX
        ("ann@aaaa-only.example.org", DomainStatus.OK, ""),
        ("ann@bücher.example", DomainStatus.OK, ""),  # looked up as its punycode name
        ("ann@nullmx.example.org", DomainStatus.REFUSED, "accepts no mail (null MX)"),
        ("ann@nowhere.example.org", DomainStatus.REFUSED, "does not exist"),
        ("ann@txt-only.example.org", DomainStatus.REFUSED, "has no MX, A or AAAA record"),
        (
            "ann@servfail.example.org",
            DomainStatus.UNKNOWN,
            "the lookup of servfail.example.org failed",
        ),
    ],
)
async def test_dns_decides_whether_a_domain_takes_mail(
    port: int, address: str, status: DomainStatus, reason: str
) -> None:
    got, why = await check(port, address)
    assert got is status
    assert reason in why


async def test_a_silent_resolver_is_unknown_within_the_timeout() -> None:
    check_ = DomainCheck(settings(closed_port(), dns_timeout=0.3))
    # The 60 s only guard against a hang; the verdict is what the test is about.
    verdict = await asyncio.wait_for(check_.check("ann@mx.example.org"), 60)
    assert verdict.status is DomainStatus.UNKNOWN


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("ann@mailinator.com", "mailinator.com hands out disposable addresses"),
        ("ann@eu.mailinator.com", "mailinator.com hands out disposable addresses"),
        ("ann@spam.example.org", "spam.example.org is on the blocked list"),
        ("ann@a.b.spam.example.org", "spam.example.org is on the blocked list"),
        ("not an address", "not a valid address"),
        ("ann@[192.0.2.1]", "not a valid address"),
    ],
)
async def test_listed_and_invalid_domains_are_refused_before_any_lookup(
    port: int, queries: list[tuple[str, str]], address: str, reason: str
) -> None:
    status, why = await check(port, address, blocked_domains=["Spam.Example.org."])
    assert status is DomainStatus.REFUSED
    assert reason in why
    assert queries == []


async def test_the_disposable_list_and_dns_can_be_turned_off(
    port: int, queries: list[tuple[str, str]]
) -> None:
    status, _ = await check(port, "ann@mailinator.com", refuse_disposable=False)
    assert status is DomainStatus.REFUSED  # not listed, but it has no records on this server
    assert queries == [("mailinator.com", "MX"), ("", "NS")]  # NXDOMAIN, and the root found
    queries.clear()
    status, _ = await check(port, "ann@nowhere.example.org", check_dns=False)
    assert (status, queries) == (DomainStatus.OK, [])


async def test_answers_are_kept_and_concurrent_checks_share_one_lookup(
    port: int, queries: list[tuple[str, str]]
) -> None:
    domains = DomainCheck(settings(port))
    verdicts = await asyncio.gather(*(domains.check(f"u{n}@mx.example.org") for n in range(50)))
    assert {v.status for v in verdicts} == {DomainStatus.OK}
    assert domains.lookups == 1
    assert queries == [("mx.example.org", "MX")]
    await domains.check("again@mx.example.org")
    await domains.check("ann@nowhere.example.org")
    await domains.check("bob@nowhere.example.org")  # a refusal is kept too
    assert domains.lookups == 2


async def test_a_resolver_that_denies_every_name_refuses_no_one() -> None:
    """NXDOMAIN for every name, the root zone's too (a captive network): nothing is known of
    the domain, so the signup goes through, and the root is asked once, not per address."""
    with dns_server({}, {"": "NXDOMAIN"}) as (port, resolver):
        domains = DomainCheck(settings(port))
        first = await domains.check("ann@mx.example.org")
        second = await domains.check("bob@elsewhere.example.org")
    assert (first.status, second.status) == (DomainStatus.UNKNOWN, DomainStatus.UNKNOWN)
    assert "the root zone's included" in first.reason
    assert resolver.queries.count(("", "NS")) == 1


async def test_a_failure_is_not_kept(port: int) -> None:
    domains = DomainCheck(settings(port))
    await domains.check("ann@servfail.example.org")
    await domains.check("ann@servfail.example.org")
    assert domains.lookups == 2


def test_listed_walks_up_to_the_registered_domain() -> None:
    names = {"example.org"}
    assert listed("a.b.example.org", names) == "example.org"
    assert listed("example.org", names) == "example.org"
    assert listed("org", {"org"}) is None  # a TLD alone is never a listed entry
    assert listed("notexample.org", names) is None


def test_the_settings_refuse_a_bad_nameserver_and_normalise_blocked_domains() -> None:
    with pytest.raises(ValueError, match="not an IP address"):
        SignupSettings(nameservers=["dns.example.org"])
    assert SignupSettings(blocked_domains=[" Spam.Example.ORG. ", ""]).blocked_domains == [
        "spam.example.org"
    ]
