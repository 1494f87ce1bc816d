"""SPF, DKIM, DMARC and MX checks against a real DNS server on 127.0.0.1 (see dnszone.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from newsletter.config.settings import CheckSettings
from newsletter.preflight import auth, report
from newsletter.preflight.faults import Fault
from newsletter.preflight.lookup import Lookup
from newsletter.preflight.spf import check_spf
from newsletter.state.statecache import Cache
from support.dkimkeys import dkim_value
from support.dnszone import ZoneResolver

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
    assert run(lambda lookup: check_spf(lookup, "news.good.example")) == []
    assert run(lambda lookup: check_spf(lookup, "redirect.example")) == []
    # Two void lookups are allowed; terms with macros are counted, never resolved.
    assert run(lambda lookup: check_spf(lookup, "twovoid.example")) == []
    assert run(lambda lookup: check_spf(lookup, "macro.example")) == []


def test_a_diamond_is_no_loop(run: Run, dns: tuple[int, ZoneResolver]) -> None:
    # a and b both include c: 4 lookups (c counted twice, as receivers count it), valid.
    assert run(lambda lookup: check_spf(lookup, "diamond.example")) == []
    asked = [name for name, kind in dns[1].queries if name == "c.diamond.example"]
    assert asked  # c was walked (at most twice: no cache in this lookup)


@pytest.mark.parametrize(
    ("domain", "eleventh"),
    [
        ("c0.chain.example", "'include:c11.chain.example' in c10.chain.example's record"),
        (
            "w.wide.example",
            f"'include:w{'0' * 11}.wide.example' in w{'0' * 10}.wide.example's record",
        ),
    ],
)
def test_endless_includes_stop_at_the_eleventh_lookup(
    run: Run, dns: tuple[int, ZoneResolver], domain: str, eleventh: str
) -> None:
    before = len(dns[1].queries)
    faults = run(lambda lookup: check_spf(lookup, domain))
    asked = len(dns[1].queries) - before
    assert [(f.severity, f.code) for f in faults] == [("auth", "spf")]
    assert faults[0].message.startswith(
        f"the SPF record of {domain} needs more than 10 DNS lookups (the 11th is {eleventh})"
    )
    assert asked <= 12  # the record, and one TXT per lookup up to the 11th, as a receiver


@pytest.mark.parametrize(
    ("domain", "severity", "text"),
    [
        (
            "missing.example",
            "auth",
            "missing.example has no SPF record: publish one TXT record at missing.example",
        ),
        ("plusall.example", "error", "ends in +all: it lets anyone send as plusall.example"),
        ("bareall.example", "error", "ends in +all"),
        ("neutral.example", "warning", "ends in ?all: mail from any host gets a neutral result"),
        ("noall.example", "warning", "ends in no all"),
        (
            "many.example",
            "auth",
            "needs more than 10 DNS lookups (the 11th is 'include:i10.many.example' in "
            "many.example's record); receivers stop there and treat it as broken (permerror, "
            "RFC 7208 4.6.4)",
        ),
        ("deep.example", "auth", "needs 10 DNS lookups"),
        ("two.example", "auth", "two.example has 2 SPF records; there must be exactly one"),
        (
            "dangling.example",
            "auth",
            "nothing.example has no SPF record (an include or redirect points at it)",
        ),
        ("badip.example", "auth", "'ip4:300.1.1.1': '300.1.1.1' is not an IPv4 address or range"),
        ("v6as4.example", "auth", "is not an IPv4 address or range"),
        (
            "loop.example",
            "auth",
            "loop.example includes itself (a loop: loop.example → loop.example)",
        ),
        (
            "ping.example",
            "auth",
            "ping.example includes itself (a loop: ping.example → pong.example → ping.example)",
        ),
        ("self.example", "auth", "self.example includes itself (a loop: self.example → self"),
        (
            "threevoid.example",
            "auth",
            "makes more than 2 void DNS lookups (names with no record: 'a:gone1.example' in "
            "threevoid.example, 'mx:gone2.example' in threevoid.example, 'exists:gone3.example' "
            "in threevoid.example); receivers treat it as broken (permerror, RFC 7208 4.6.4)",
        ),
        ("manymx.example", "auth", "which has 11 MX hosts, over the limit of 10"),
        ("unknown.example", "auth", "'foo:bar' is not an SPF mechanism"),
    ],
)
def test_spf_faults(run: Run, domain: str, severity: str, text: str) -> None:
    faults = run(lambda lookup: check_spf(lookup, domain))
    if domain == "deep.example":  # 2 includes + 5 + 3 terms = exactly 10: allowed
        assert faults == []
        return
    assert len(faults) == 1
    assert faults[0].severity == severity
    assert text in faults[0].message


def test_dkim_matches_the_configured_key(run: Run, dkim_key: rsa.RSAPrivateKey) -> None:
    public = auth.public_key_base64(dkim_key.public_key())
    assert run(lambda lookup: auth.check_dkim(lookup, "news.good.example", "nl", public)) == []


def test_dkim_missing_names_the_exact_record(run: Run, dkim_key: rsa.RSAPrivateKey) -> None:
    public = auth.public_key_base64(dkim_key.public_key())
    faults = run(lambda lookup: auth.check_dkim(lookup, "missing.example", "nl", public))
    expected = f'publish TXT nl._domainkey.missing.example "{dkim_value(dkim_key)}"'
    assert messages(faults) == [
        (
            "auth",
            "no DKIM key at nl._domainkey.missing.example: no receiver can verify a signature; "
            + expected,
        )
    ]
    assert auth.dkim_txt_value(public) == dkim_value(dkim_key)


@pytest.mark.parametrize(
    ("domain", "severity", "text"),
    [
        (
            "wrong.example",
            "error",
            "does not match [dkim] private_key: every message would fail DKIM",
        ),
        ("revoked.example", "error", "is revoked (empty p=)"),
        ("garbage.example", "error", "does not match [dkim] private_key"),
        ("testing.example", "warning", "is in test mode (t=y)"),
        ("twice.example", "error", "has 2 TXT records; keep only"),
    ],
)
def test_dkim_faults(
    run: Run, dkim_key: rsa.RSAPrivateKey, domain: str, severity: str, text: str
) -> None:
    public = auth.public_key_base64(dkim_key.public_key())
    faults = run(lambda lookup: auth.check_dkim(lookup, domain, "nl", public))
    assert len(faults) == 1
    assert faults[0].severity == severity
    assert text in faults[0].message


def test_dmarc_on_the_organizational_domain_and_aligned(run: Run) -> None:
    found = run(
        lambda lookup: auth.check_dmarc(
            lookup, "news.good.example", "news.good.example", "news.good.example"
        )
    )
    assert found == []
    own = run(lambda lookup: auth.check_dmarc(lookup, "news.own.example", None, "news.own.example"))
    assert own == []


def test_dmarc_missing_broken_and_doubled(run: Run) -> None:
    missing = run(
        lambda lookup: auth.check_dmarc(
            lookup, "news.missing.example", None, "news.missing.example"
        )
    )
    assert messages(missing) == [
        (
            "auth",
            "no DMARC record for news.missing.example: publish TXT _dmarc.missing.example "
            '"v=DMARC1; p=none; rua=mailto:dmarc@missing.example" (then move to p=quarantine once '
            "reports "
            "show only your own mail)",
        )
    ]
    broken = run(lambda lookup: auth.check_dmarc(lookup, "broken.example", None, "broken.example"))
    assert "the DMARC record at _dmarc.broken.example is broken" in broken[0].message
    double = run(lambda lookup: auth.check_dmarc(lookup, "double.example", None, "double.example"))
    assert double[0].message == "_dmarc.double.example has 2 DMARC records; keep one"


def test_dmarc_alignment_strict_and_relaxed(run: Run) -> None:
    # Relaxed: a DKIM d= on the same organizational domain aligns.
    relaxed = run(
        lambda lookup: auth.check_dmarc(
            lookup, "news.relaxed.example", "relaxed.example", "bounce.other.example"
        )
    )
    assert relaxed == []
    # Strict: only the very same domain does.
    strict = run(
        lambda lookup: auth.check_dmarc(
            lookup, "news.strict.example", "strict.example", "bounce.strict.example"
        )
    )
    assert len(strict) == 1
    assert strict[0].severity == "auth"
    assert strict[0].message.startswith(
        "From news.strict.example is aligned with neither the DKIM d= (strict.example) nor the "
        "return path (bounce.strict.example) under _dmarc.strict.example (adkim=s, aspf=s)"
    )
    spf_only = run(
        lambda lookup: auth.check_dmarc(lookup, "news.strict.example", None, "news.strict.example")
    )
    assert spf_only == []


def test_mail_domains(run: Run) -> None:
    assert run(lambda lookup: auth.check_mail_domain(lookup, "news.good.example", "From")) == []
    assert run(lambda lookup: auth.check_mail_domain(lookup, "aonly.example", "From")) == []
    null = run(
        lambda lookup: auth.check_mail_domain(lookup, "nullmx.example", "Reply-To (replies)")
    )
    assert messages(null) == [
        ("error", "Reply-To (replies) domain nullmx.example has a null MX: it accepts no mail")
    ]
    missing = run(
        lambda lookup: auth.check_mail_domain(lookup, "missing.example", "From (bounces)")
    )
    assert "From (bounces) domain missing.example has no MX (and no address)" in missing[0].message


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
