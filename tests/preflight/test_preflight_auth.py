"""SPF, DKIM, DMARC and MX checks against a real DNS server on 127.0.0.1 (see dnszone.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from dkimkeys import dkim_value
from dnszone import ZoneResolver

from newsletter.preflight import auth, report
from newsletter.preflight.cache import Cache
from newsletter.preflight.faults import Fault
from newsletter.preflight.lookup import Lookup
from newsletter.preflight.spf import check_spf
from newsletter.settings import CheckSettings

T = TypeVar("T")


@pytest.fixture
def run(dns: tuple[int, ZoneResolver]) -> Callable[[Callable[[Lookup], Awaitable[T]]], T]:
    lookup = Lookup(CheckSettings(nameservers=[f"127.0.0.1:{dns[0]}"], timeout=2), Cache(None))

    def runner(check: Callable[[Lookup], Awaitable[T]]) -> T:
        return asyncio.run(check(lookup))

    return runner


Run = Callable[[Callable[[Lookup], Awaitable[list[Fault]]]], list[Fault]]


def messages(faults: list[Fault]) -> list[tuple[str, str]]:
    return [(fault.severity, fault.message) for fault in faults]


def test_good_spf(run: Run) -> None:
    assert run(lambda lookup: check_spf(lookup, "news.good.test")) == []
    assert run(lambda lookup: check_spf(lookup, "redirect.test")) == []


@pytest.mark.parametrize(
    ("domain", "severity", "text"),
    [
        (
            "missing.test",
            "auth",
            'missing.test has no SPF record: publish one TXT record at missing.test, e.g. "v=spf1',
        ),
        ("plusall.test", "error", "ends in +all: it lets anyone send as plusall.test"),
        ("bareall.test", "error", "ends in +all"),
        ("neutral.test", "warning", "ends in ?all: mail from any host gets a neutral result"),
        ("noall.test", "warning", "ends in no all"),
        ("many.test", "auth", "needs 11 DNS lookups, over the limit of 10"),
        ("deep.test", "auth", "needs 10 DNS lookups"),
        ("two.test", "auth", "two.test has 2 SPF records; there must be exactly one"),
        (
            "dangling.test",
            "auth",
            "nothing.test has no SPF record (an include or redirect points at it)",
        ),
        ("badip.test", "auth", "'ip4:300.1.1.1': '300.1.1.1' is not an IPv4 address or range"),
        ("v6as4.test", "auth", "is not an IPv4 address or range"),
        ("loop.test", "auth", "loop.test includes itself (a loop)"),
        ("unknown.test", "auth", "'foo:bar' is not an SPF mechanism"),
    ],
)
def test_spf_faults(run: Run, domain: str, severity: str, text: str) -> None:
    faults = run(lambda lookup: check_spf(lookup, domain))
    if domain == "deep.test":  # 2 includes + 5 + 3 terms = exactly 10: allowed
        assert faults == []
        return
    assert len(faults) == 1
    assert faults[0].severity == severity
    assert text in faults[0].message


def test_dkim_matches_the_configured_key(run: Run, dkim_key: rsa.RSAPrivateKey) -> None:
    public = dkim_key.public_key()
    assert run(lambda lookup: auth.check_dkim(lookup, "news.good.test", "nl", public)) == []


def test_dkim_missing_names_the_exact_record(run: Run, dkim_key: rsa.RSAPrivateKey) -> None:
    public = dkim_key.public_key()
    faults = run(lambda lookup: auth.check_dkim(lookup, "missing.test", "nl", public))
    expected = f'publish TXT nl._domainkey.missing.test "{dkim_value(dkim_key)}"'
    assert messages(faults) == [
        (
            "auth",
            "no DKIM key at nl._domainkey.missing.test: no receiver can verify a signature; "
            + expected,
        )
    ]
    assert auth.dkim_txt_value(public) == dkim_value(dkim_key)


@pytest.mark.parametrize(
    ("domain", "severity", "text"),
    [
        ("wrong.test", "error", "does not match [dkim] private_key: every message would fail DKIM"),
        ("revoked.test", "error", "is revoked (empty p=)"),
        ("garbage.test", "error", "does not match [dkim] private_key"),
        ("testing.test", "warning", "is in test mode (t=y)"),
        ("twice.test", "error", "has 2 TXT records; keep only"),
    ],
)
def test_dkim_faults(
    run: Run, dkim_key: rsa.RSAPrivateKey, domain: str, severity: str, text: str
) -> None:
    faults = run(lambda lookup: auth.check_dkim(lookup, domain, "nl", dkim_key.public_key()))
    assert len(faults) == 1
    assert faults[0].severity == severity
    assert text in faults[0].message


def test_dmarc_on_the_organizational_domain_and_aligned(run: Run) -> None:
    found = run(
        lambda lookup: auth.check_dmarc(
            lookup, "news.good.test", "news.good.test", "news.good.test"
        )
    )
    assert found == []
    own = run(lambda lookup: auth.check_dmarc(lookup, "news.own.test", None, "news.own.test"))
    assert own == []


def test_dmarc_missing_broken_and_doubled(run: Run) -> None:
    missing = run(
        lambda lookup: auth.check_dmarc(lookup, "news.missing.test", None, "news.missing.test")
    )
    assert messages(missing) == [
        (
            "auth",
            'no DMARC record for news.missing.test: publish TXT _dmarc.missing.test "v=DMARC1; '
            'p=none; rua=mailto:dmarc@missing.test" (then move to p=quarantine once reports '
            "show only your own mail)",
        )
    ]
    broken = run(lambda lookup: auth.check_dmarc(lookup, "broken.test", None, "broken.test"))
    assert "the DMARC record at _dmarc.broken.test is broken" in broken[0].message
    double = run(lambda lookup: auth.check_dmarc(lookup, "double.test", None, "double.test"))
    assert double[0].message == "_dmarc.double.test has 2 DMARC records; keep one"


def test_dmarc_alignment_strict_and_relaxed(run: Run) -> None:
    # Relaxed: a DKIM d= on the same organizational domain aligns.
    relaxed = run(
        lambda lookup: auth.check_dmarc(
            lookup, "news.relaxed.test", "relaxed.test", "bounce.other.test"
        )
    )
    assert relaxed == []
    # Strict: only the very same domain does.
    strict = run(
        lambda lookup: auth.check_dmarc(
            lookup, "news.strict.test", "strict.test", "bounce.strict.test"
        )
    )
    assert len(strict) == 1
    assert strict[0].severity == "auth"
    assert strict[0].message.startswith(
        "From news.strict.test is aligned with neither the DKIM d= (strict.test) nor the "
        "return path (bounce.strict.test) under _dmarc.strict.test (adkim=s, aspf=s)"
    )
    spf_only = run(
        lambda lookup: auth.check_dmarc(lookup, "news.strict.test", None, "news.strict.test")
    )
    assert spf_only == []


def test_mail_domains(run: Run) -> None:
    assert run(lambda lookup: auth.check_mail_domain(lookup, "news.good.test", "From")) == []
    assert run(lambda lookup: auth.check_mail_domain(lookup, "aonly.test", "From")) == []
    null = run(lambda lookup: auth.check_mail_domain(lookup, "nullmx.test", "Reply-To (replies)"))
    assert messages(null) == [
        ("error", "Reply-To (replies) domain nullmx.test has a null MX: it accepts no mail")
    ]
    missing = run(lambda lookup: auth.check_mail_domain(lookup, "missing.test", "From (bounces)"))
    assert "From (bounces) domain missing.test has no MX (and no address)" in missing[0].message


def test_bulk_line_decides_the_level() -> None:
    faults = [Fault("spf", "no SPF", "auth"), Fault("dkim", "mismatch"), Fault("x", "w", "warning")]
    small = report.fault_findings(faults, 5000)
    big = report.fault_findings(faults, 5001)
    assert [f.level for f in small] == ["warning", "error", "warning"]
    assert [f.level for f in big] == ["error", "error", "warning"]
    assert small[0].message == "no SPF (list of 5,000, under the bulk line of 5,000)"
    assert big[0].message == "no SPF (list of 5,001, over the bulk line of 5,000)"


def test_organizational_domain() -> None:
    assert auth.organizational_domain("a.news.example.org") == "example.org"
    assert auth.organizational_domain("news.example.co.uk") == "example.co.uk"
    assert auth.aligned("news.example.org", "example.org", "r")
    assert not auth.aligned("news.example.org", "example.org", "s")
